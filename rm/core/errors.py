"""Errors a user can cause.  The CLI prints them as one line and exits non-zero."""


class InputError(ValueError):
    """Bad input: the message names the file, the row and the field where known.

    ``where`` is prefixed as ``file:row: field:`` so every loader reports the same way.
    """

    def __init__(self, message: str, *, file: str | None = None, row: int | str | None = None,
                 field: str | None = None):
        self.file, self.row, self.field, self.reason = file, row, field, message
        super().__init__(self._format())

    def _format(self) -> str:
        where = []
        if self.file:
            where.append(str(self.file) + (f":{self.row}" if self.row is not None else ""))
        elif self.row is not None:
            where.append(f"row {self.row}")
        if self.field:
            where.append(f"field '{self.field}'")
        text = (": ".join(where) + ": " if where else "") + self.reason
        return text.replace("\r", "\\r").replace("\n", "\\n")      # one line, whatever the input held

    def at(self, *, file: str | None = None, row: int | str | None = None,
           field: str | None = None) -> "InputError":
        """The same error with the location filled in where it was not known yet."""
        return InputError(self.reason, file=self.file or file,
                          row=self.row if self.row is not None else row,
                          field=self.field or field)


class RunError(RuntimeError):
    """A run that cannot go on for a reason outside its input (the Ray nodes it was placed
    on left before it started).  The CLI prints it as one line and exits 1."""
