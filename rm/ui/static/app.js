// rayrm's ResourceManager page: polls /ws/v1/rayrm/* once a second and redraws when the
// view's version changes.  Plain JS and SVG, no library.  The charts carry data-*
// attributes (points drawn, last sample) so a test can read what they show.
"use strict";
const COLORS = ["#2f6fde", "#e0662f", "#1a9c6b", "#b0389c", "#d4a514", "#4aa3b8", "#7a5cd6", "#c0362c",
                "#5b7f1f", "#8c6239", "#e377c2", "#17becf"];
const W = 480, H = 200, L = 40, R = 8, T = 8, B = 22;
const $ = (id) => document.getElementById(id);
let version = -1, updates = 0;

function el(tag, attrs, text) {
  const ns = ["svg", "path", "line", "text", "g", "rect"].includes(tag) ? "http://www.w3.org/2000/svg" : null;
  const e = ns ? document.createElementNS(ns, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function fmt(x, d) { return (x === null || x === undefined) ? "-" : Number(x).toFixed(d === undefined ? 0 : d); }

// series: [{name, points: [[t, v], ...], step}]; draws axes 0..ymax over tmin..tmax
function chart(svg, legend, series, ymax, ylabel) {
  svg.replaceChildren();
  legend.replaceChildren();
  let tmin = Infinity, tmax = -Infinity;
  for (const s of series) for (const p of s.points) { tmin = Math.min(tmin, p[0]); tmax = Math.max(tmax, p[0]); }
  if (!isFinite(tmin)) { tmin = 0; tmax = 1; }
  if (tmax <= tmin) tmax = tmin + 1;
  const x = (t) => L + (t - tmin) / (tmax - tmin) * (W - L - R);
  const y = (v) => H - B - Math.min(v, ymax) / ymax * (H - T - B);
  for (let i = 0; i <= 4; i++) {
    const v = ymax * i / 4;
    svg.append(el("line", {x1: L, x2: W - R, y1: y(v), y2: y(v), class: "axis"}));
    svg.append(el("text", {x: L - 4, y: y(v) + 3, "text-anchor": "end"}, ylabel(v)));
  }
  for (let i = 0; i <= 4; i++) {
    const t = tmin + (tmax - tmin) * i / 4;
    svg.append(el("text", {x: x(t), y: H - 6, "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle"}, fmt(t) + "s"));
  }
  series.forEach((s, i) => {
    const c = COLORS[(s.color === undefined ? i : s.color) % COLORS.length];
    let d = "";
    s.points.forEach((p, k) => {
      if (k === 0) d += `M${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`;
      else {
        if (s.step) d += `H${x(p[0]).toFixed(1)}`;
        d += `L${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`;
      }
    });
    const last = s.points.length ? s.points[s.points.length - 1] : [null, null];
    const attrs = {d: d, stroke: c, "data-name": s.name, "data-points": s.points.length,
                   "data-last-time": last[0], "data-last-value": last[1]};
    if (s.dash) attrs["stroke-dasharray"] = "4 3";
    svg.append(el("path", attrs));
    if (s.dash) return;                 // one legend entry per queue: its share's
    const item = el("span");
    const swatch = el("i");
    swatch.style.background = c;       // through the CSSOM: the page's CSP forbids style attributes
    item.append(swatch, document.createTextNode(s.name));
    legend.append(item);
  });
  svg.dataset.points = series.length ? series[0].points.length : 0;
}

function cards(o) {
  const apps = o.apps || {}, nodes = o.nodes || {};
  const items = [
    [o.running, "containers running"], [o.pending, "tasks pending"],
    [`${o.finished} / ${o.tasks}`, "tasks finished"],
    [`${apps.running || 0} / ${apps.waiting || 0}` + (apps.unfinished ? ` (${apps.unfinished} cut short)` : ""),
     "apps running / waiting"],
    [(apps.finished || 0) + (apps.failed || 0) + (apps.rejected || 0), "apps ended"],
    [`${nodes.RUNNING || 0}` + (nodes.LOST ? ` (${nodes.LOST} lost)` : ""), "nodes active"],
  ];
  o.dims.forEach((d, k) => items.push([`${fmt(100 * o.used[k] / (o.total[k] || 1))}%`, `${d} in use`]));
  $("cards").replaceChildren(...items.map(([v, label], i) => {
    const c = el("div", {class: "card", id: `card-${i}`});
    c.append(el("b", {}, String(v)), el("span", {}, label));
    return c;
  }));
  $("cards").dataset.running = o.running;
}

function header(o) {
  $("name").textContent = o.name;
  $("policy").textContent = `${o.policy} · ${o.mode === "ray" ? "Ray replay" : "simulation"}`;
  $("state").textContent = o.state;
  $("state").className = `badge ${o.state}`;
  $("time").textContent = `t = ${fmt(o.traceTime, 1)} s (trace)`;
  const p = o.pace || {};
  let text = "";
  if (typeof p.lag_wall_s === "number") text = `pace: ${p.kept_pace ? "keeping pace" : "BEHIND"} · RM lag ${fmt(1000 * p.lag_wall_s)} ms (${fmt(p.lag_trace_s, 2)} s trace) · behind ${fmt(100 * (p.behind_fraction || 0), 1)}% of the RM's ticks`;
  else if (p.kept_pace !== undefined) text = `pace: ${p.kept_pace ? "kept pace" : "fell behind"} · lag p99 ${fmt(1000 * ((p.lag_wall_s || {}).p99 || 0))} ms`;
  $("pace").textContent = text;
  $("pace").className = p.kept_pace === false ? "behind" : "";
  $("error").textContent = o.error ? `(RM not answering: ${o.error})` : "";
  $("faults").replaceChildren(...(o.faults.length ? o.faults : [{text: "none"}]).map(
    (f) => el("li", {}, f.time === undefined ? f.text : `t = ${fmt(f.time, 1)} s: ${f.text}`)));
}

// the scheduler's queues (/ws/v1/cluster/scheduler, Fair's or Capacity's shape): each queue's
// share, what it is owed, containers, and preemption (aggregateContainersPreempted, containersWarned)
function queueTable(h, s) {
  const info = s.scheduler.schedulerInfo, rows = [];
  const fair = info.type === "fairScheduler";
  const walk = (q, depth) => {
    rows.push([q, depth]);
    for (const k of ((fair ? q.childQueues : q.queues) || {}).queue || []) walk(k, depth + 1);
  };
  if (fair) walk(info.rootQueue, 0); else for (const q of (info.queues || {}).queue || []) walk(q, 1);
  $("queues-panel").hidden = Object.keys(h.queues || {}).length === 0;
  const on = rows.some(([q]) => fair ? q.preemptable : q.preemptionDisabled === false);
  $("queues-note").textContent = on ? "(preemption on)" : "(preemption off)";
  $("queue-table").tBodies[0].replaceChildren(...rows.map(([q, depth]) => {
    const name = fair ? q.queueName : q.queuePath;
    const tr = el("tr", {"data-queue": name});
    const share = fair ? q.share : q.absoluteUsedCapacity / 100;
    const containers = fair ? q.allocatedContainers : (q.numContainers === undefined ? "" : q.numContainers);
    for (const v of ["\u00a0".repeat(2 * depth) + name, fmt(share, 3), fmt(q.fairShare, 3), containers,
                     q.aggregateContainersPreempted, q.containersWarned]) tr.append(el("td", {}, String(v)));
    return tr;
  }));
}

function draw(o, h, sh, apps, nodes, pend) {
  const times = h.times;
  chart($("use"), $("use-legend"), h.dims.map((d, k) => ({name: d, points: times.map((t, i) => [t, 100 * h.used[i][k]])})),
        100, (v) => `${fmt(v)}%`);
  const kind = sh.shareKind === "task_share" ? "task share" : "dominant share";
  $("share-title").textContent = `Each app's ${kind} (top ${Object.keys(sh.apps).length})`;
  const ss = Object.entries(sh.apps).map(([a, pts]) => ({name: a, points: pts.concat(pts.length ? [[sh.time, pts[pts.length - 1][1]]] : []), step: true}));
  let smax = 0;
  for (const s of ss) for (const p of s.points) smax = Math.max(smax, p[1]);
  chart($("shares"), $("shares-legend"), ss, Math.max(0.05, Math.ceil(smax * 10) / 10), (v) => fmt(v, 2));
  queues(h);
  let cmax = 1;
  for (let i = 0; i < times.length; i++) cmax = Math.max(cmax, h.running[i], h.pending[i]);
  chart($("counts"), $("counts-legend"), [
    {name: "running", points: times.map((t, i) => [t, h.running[i]])},
    {name: "pending", points: times.map((t, i) => [t, h.pending[i]])}], cmax, (v) => fmt(v));
  $("apps-total").textContent = `(${apps.apps.length} of ${apps.total})`;
  $("apps").tBodies[0].replaceChildren(...apps.apps.map((a) => {
    const tr = el("tr", {title: a.reason || ""});
    for (const v of [a.id, a.state, a.running, a.pending, a.finished, a.tasks, fmt(a.share, 3), a.attempts]) tr.append(el("td", {}, String(v)));
    return tr;
  }));
  $("nodes-total").textContent = `(${nodes.total}; colour: busiest resource)`;
  $("nodes").replaceChildren(...nodes.nodes.map((n) => {
    const u = Math.max(0, ...n.used);
    const d = el("div", {class: n.state, title: `${n.id} ${n.state} ${n.containers} containers ` +
      nodes.dims.map((x, k) => `${x} ${fmt(100 * n.used[k])}%`).join(" ") + (n.detail ? ` (${n.detail})` : "")});
    if (n.state === "RUNNING") d.style.background = `rgba(47,111,222,${0.12 + 0.88 * u})`;
    return d;
  }));
  $("pending").replaceChildren(...(pend.apps.length ? pend.apps.map((a) => el("li", {}, `${a.id} (${a.pending} waiting): ${a.reason}`))
                                                      : [el("li", {}, "nothing waits")]));
}

// each queue's share (solid) and what it is owed (dashed), steps carried to the last sample
function queues(h) {
  const names = Object.keys(h.queues || {});
  $("queues-figure").hidden = names.length === 0;
  if (!names.length) return;
  const end = h.times.length ? h.times[h.times.length - 1] : 0;
  const series = [];
  names.forEach((q, i) => {
    const pts = h.queues[q], last = pts[pts.length - 1];
    const upto = (k) => pts.map((p) => [p[0], p[k]]).concat(last[0] < end ? [[end, last[k]]] : []);
    series.push({name: q, points: upto(1), step: true, color: i},
                {name: `${q} owed`, points: upto(2), step: true, color: i, dash: true});
  });
  let ymax = 0;
  for (const s of series) for (const p of s.points) ymax = Math.max(ymax, p[1]);
  chart($("queues"), $("queues-legend"), series, Math.max(0.05, Math.ceil(ymax * 10) / 10), (v) => fmt(v, 2));
}

async function get(path) {
  const r = await fetch(path, {credentials: "same-origin"});
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
  return r.json();
}

async function tick() {
  try {
    const o = await get("/ws/v1/rayrm/overview");
    header(o);
    if (o.version !== version) {
      const [h, sh, apps, nodes, pend, sched] = await Promise.all([get("/ws/v1/rayrm/history"), get("/ws/v1/rayrm/shares?top=10"),
        get("/ws/v1/rayrm/apps?limit=100"), get("/ws/v1/rayrm/nodes"), get("/ws/v1/rayrm/pending?limit=10"),
        get("/ws/v1/cluster/scheduler")]);
      cards(o);
      draw(o, h, sh, apps, nodes, pend);
      queueTable(h, sched);
      version = o.version;
      updates += 1;
      document.body.dataset.version = version;
      document.body.dataset.updates = updates;
      document.body.dataset.state = o.state;
    }
  } catch (e) {
    $("error").textContent = `(${e.message})`;
  }
  setTimeout(tick, 1000);
}
tick();
