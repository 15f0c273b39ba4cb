"""PostgreSQL 15's regression files as a differential test of pgwarden: the files come from Debian's
source package (scripts/deps keeps src/test/regress in REGRESS_DIR), are split into statements the
way psql splits them, and each statement is sent on two connections in lockstep, one straight to the
server and one through pgwarden, recording every message of each answer up to ReadyForQuery.

https://www.postgresql.org/docs/15/regress.html ; the splitting follows psql's lexer
(src/fe_utils/psqlscan.l): quotes, E'' strings, dollar quotes, nested comments, parentheses,
backslash commands (which end at the end of the line), and `:var` interpolation.
"""

import json
import os
import pathlib
import re
import struct

import pgwtest

REGRESS_DIR = pathlib.Path(os.environ.get("PGWARDEN_REGRESS_DIR",
                                          "/var/cache/pgwarden-test/postgresql-15-regress"))

# Backslash commands after which psql sends the query buffer.
SENDING_COMMANDS = {"g", "gx", "gset", "gexec", "gdesc", "crosstabview"}
_DOLLAR = re.compile(r"\$([A-Za-z_\x80-\uffff][A-Za-z0-9_\x80-\uffff]*)?\$")
_IDENT_CHAR = re.compile(r"[A-Za-z0-9_$\x80-\uffff]")
_VAR_NAME = re.compile(r"[A-Za-z0-9_]+")
_COPY_IN = re.compile(r"(?is)^\s*copy\b.*\bfrom\s+stdin\b")


class Statement:
    """One statement as psql would send it: literal text and `:var` references (name, quoting),
    and the backslash command that sent it (`gset` needs its result as variables)."""

    def __init__(self, parts, sender, args=""):
        self.parts = parts
        self.sender = sender
        self.args = args  # the sending command's arguments (\gset's prefix)

    def text(self, variables):
        """The text psql sends, variables interpolated; None if it names one that is not set."""
        out = []
        for kind, value in self.parts:
            if kind == "text":
                out.append(value)
            elif value not in variables:
                if kind == "var":
                    out.append(":" + value)  # psql leaves an unknown :name as it is
                else:
                    return None
            elif kind == "var":
                out.append(variables[value])
            elif kind == "literal":
                out.append("'" + variables[value].replace("'", "''") + "'")
            else:
                out.append('"' + variables[value].replace('"', '""') + '"')
        return "".join(out)


class Meta:
    def __init__(self, name, args):
        self.name = name
        self.args = args


_IDENT = re.compile(r"[A-Za-z_\x80-\uffff][A-Za-z0-9_$\x80-\uffff]*")
_STD_STRINGS = re.compile(r"(?is)^\s*(set\s+standard_conforming_strings\s*(?:to|=)\s*'?(\w+)'?"
                          r"|reset\s+standard_conforming_strings)\s*;")


def split(text):
    """A file's statements and backslash commands, in order (Statement and Meta objects)."""
    items = []
    parts, buf = [], []
    depth = 0
    # psql's heuristic for CREATE [OR REPLACE] FUNCTION|PROCEDURE ... BEGIN ATOMIC ... END: the
    # first identifiers of the statement, and BEGIN/CASE/END nesting outside parentheses.
    words, begin_depth = [], 0
    # psql reads backslashes in '' strings as escapes while standard_conforming_strings is off.
    std_strings = True
    i, n = 0, len(text)

    def flush_text():
        if buf:
            parts.append(("text", "".join(buf)))
            buf.clear()

    def has_content():
        return any(k != "text" or v.strip() for k, v in parts) or "".join(buf).strip()

    def emit(sender, args=""):
        nonlocal parts, depth, words, begin_depth, std_strings
        flush_text()
        if any(k != "text" or v.strip() for k, v in parts):
            items.append(Statement(parts, sender, args))
            m = _STD_STRINGS.match(_plain(items[-1]))
            if m:
                std_strings = not m.group(2) or m.group(2).lower() in ("on", "true", "1", "yes")
        parts = []
        depth = 0
        words, begin_depth = [], 0

    def in_routine_body():
        w = [x[0] for x in words[:4]]
        return len(w) >= 2 and w[0] == "c" and (w[1] in "fp" or (
            w[1] == "o" and len(w) >= 4 and w[2] == "r" and w[3] in "fp"))

    while i < n:
        c = text[i]
        if c == "-" and text.startswith("--", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            if has_content():
                buf.append(text[i:end])
            i = end
        elif c == "/" and text.startswith("/*", i):
            level, j = 1, i + 2
            while j < n and level:
                if text.startswith("/*", j):
                    level, j = level + 1, j + 2
                elif text.startswith("*/", j):
                    level, j = level - 1, j + 2
                else:
                    j += 1
            buf.append(text[i:j])
            i = j
        elif c == "'":
            # The prefix: E'' has backslash escapes; U&'' and B''/X'' never do; a plain '' does
            # while standard_conforming_strings is off.
            prev = text[i - 1] if i else ""
            alone = i < 2 or not _IDENT_CHAR.match(text[i - 2])
            if prev in "eE" and alone:
                escapes = True
            elif (prev in "bBxX" and alone) or text[max(0, i - 2):i] in ("U&", "u&"):
                escapes = False
            else:
                escapes = not std_strings
            j = i + 1
            while j < n:
                if escapes and text[j] == "\\":
                    j += 2
                elif text[j] == "'":
                    if j + 1 < n and text[j + 1] == "'":
                        j += 2
                    else:
                        break
                else:
                    j += 1
            buf.append(text[i:j + 1])
            i = j + 1
        elif c == '"':
            j = i + 1
            while j < n:
                if text[j] == '"':
                    if j + 1 < n and text[j + 1] == '"':
                        j += 2
                        continue
                    break
                j += 1
            buf.append(text[i:j + 1])
            i = j + 1
        elif c == "$" and (i == 0 or not _IDENT_CHAR.match(text[i - 1])) and _DOLLAR.match(text, i):
            delim = _DOLLAR.match(text, i).group(0)
            end = text.find(delim, i + len(delim))
            end = n if end < 0 else end + len(delim)
            buf.append(text[i:end])
            i = end
        elif c == "(":
            depth += 1
            buf.append(c)
            i += 1
        elif c == ")":
            depth = max(0, depth - 1)
            buf.append(c)
            i += 1
        elif _IDENT.match(text, i) and (i == 0 or not _IDENT_CHAR.match(text[i - 1])):
            word = _IDENT.match(text, i).group(0)
            lower = word.lower()
            words.append(lower if lower in ("create", "or", "replace", "function", "procedure")
                         else "?")
            if in_routine_body() and depth == 0:
                if lower == "begin":
                    begin_depth += 1
                elif lower == "case" and begin_depth:
                    begin_depth += 1
                elif lower == "end" and begin_depth:
                    begin_depth -= 1
            buf.append(word)
            i += len(word)
        elif c == ";":
            buf.append(c)
            i += 1
            if depth == 0 and begin_depth == 0:
                emit(";")
                last = items[-1] if items else None
                if isinstance(last, Statement) and _COPY_IN.search(_plain(last)):
                    # COPY ... FROM STDIN: its data follows, up to a line "\.", and is not SQL.
                    end = text.find("\n\\.", i)
                    i = n if end < 0 else end + 3
        elif c == ":" and text.startswith("::", i):
            buf.append("::")
            i += 2
        elif c == ":" and i + 1 < n and (text[i + 1] in "'\"" or _VAR_NAME.match(text, i + 1)):
            q = text[i + 1]
            if q in "'\"":
                end = text.find(q, i + 2)
                name = text[i + 2:end] if end > 0 else ""
                if end > 0 and _VAR_NAME.fullmatch(name):
                    flush_text()
                    parts.append(("literal" if q == "'" else "ident", name))
                    i = end + 1
                    continue
                buf.append(c)
                i += 1
            else:
                name = _VAR_NAME.match(text, i + 1).group(0)
                flush_text()
                parts.append(("var", name))
                i += 1 + len(name)
        elif c == "\\":
            end = text.find("\n", i)
            end = n if end < 0 else end
            line = text[i + 1:end]
            if line.startswith(";"):  # \; : a semicolon that does not send
                buf.append(";")
                i += 2
                continue
            m = re.match(r"([A-Za-z0-9_!?]+|.)", line)
            name = m.group(0) if m else ""
            args = line[len(name):].strip()
            # Backslash commands end at the end of the line, or at a \\ separator.
            if name in SENDING_COMMANDS:
                emit(name, args)
            else:
                items.append(Meta(name, args))
            i = end
            if name == "copy" and re.search(r"(?i)\bfrom\s+(stdin|pstdin)\b", args):
                end = text.find("\n\\.", i)  # \copy's data, up to a line "\."
                i = n if end < 0 else end + 3
        else:
            if not (c.isspace() and not has_content()):  # psql drops leading whitespace
                buf.append(c)
            i += 1
    flush_text()
    if any(k != "text" or v.strip() for k, v in parts):
        items.append(Statement(parts, "eof"))
    return items


def _plain(stmt):
    return "".join(v for k, v in stmt.parts if k == "text")


def meta_set(variables, args):
    """psql's \\set NAME VALUE...: the value tokens concatenated, 'quoted' ones unquoted,
    :var ones interpolated."""
    tokens = re.findall(r"'(?:[^']|'')*'|:'[A-Za-z0-9_]+'|:[A-Za-z0-9_]+|\S+", args)
    if not tokens:
        return
    name, value = tokens[0], []
    for t in tokens[1:]:
        if t.startswith("'"):
            value.append(t[1:-1].replace("''", "'"))
        elif t.startswith(":'"):
            value.append("'" + variables.get(t[2:-1], "").replace("'", "''") + "'")
        elif t.startswith(":"):
            value.append(variables.get(t[1:], t))
        else:
            value.append(t)
    variables[name] = "".join(value)


def psql_env():
    """The environment pg_regress gives psql: where test_setup finds its data and library."""
    return {"PG_ABS_SRCDIR": str(REGRESS_DIR), "PG_LIBDIR": str(pgwtest.PG_BIN.parent / "lib"),
            "PG_DLSUFFIX": ".so"}


def file_statements(name):
    """The statements of sql/NAME.sql as psql would send them, in order: the text, or None for
    one that needs a variable psql would only know from a result (\\gset). Variables come from
    \\set and \\getenv; other backslash commands (\\pset, \\d, ...) are psql's own and skipped."""
    env = psql_env()
    variables, texts = {}, []
    for item in split((REGRESS_DIR / "sql" / f"{name}.sql").read_text()):
        if isinstance(item, Meta):
            if item.name == "set":
                meta_set(variables, item.args)
            elif item.name == "getenv":
                var, _, envname = item.args.partition(" ")
                if envname.strip() in env:
                    variables[var] = env[envname.strip()]
        else:
            texts.append(item.text(variables))
    return texts


# --------------------------------------------------------------------------------------------
# Running statements: every message of an answer, as sent.

class Recorder(pgwtest.RawClient):
    """A v3 client that keeps each answer's messages (type, body) up to ReadyForQuery."""

    def run(self, sql):
        self.send_msg(b"Q", sql.encode() + b"\0")
        msgs = []
        while True:
            tag, body = self.read_msg()
            if tag == b"G":  # COPY FROM STDIN: no data, as if the input had ended at once
                self.send_msg(b"f", b"no COPY data in the regression comparison\0")
            msgs.append((tag, body))
            if tag == b"Z":
                return msgs


def error_fields(msgs):
    for tag, body in msgs:
        if tag == b"E":
            return pgwtest.parse_fields(body)
    return None


def refusal(msgs):
    """pgwarden's denial facts when the answer is one of its denials (the detail is its JSON:
    code, kind, ...), else {}."""
    fields = error_fields(msgs)
    if not fields or not fields.get("D", "").startswith('{"code":'):
        return {}
    try:
        return json.loads(fields["D"])
    except ValueError:
        return {}


def refusal_code(msgs):
    return refusal(msgs).get("code")


def describe(msgs, limit=600):
    """A short readable form of an answer, for failure messages and the report."""
    out = []
    for tag, body in msgs:
        t = tag.decode()
        if t in "EN":
            f = pgwtest.parse_fields(body)
            out.append(f"{t}:{f.get('C')} {f.get('M')}" + (f" [{f['D']}]" if "D" in f else "")
                       + (f" HINT {f['H']}" if "H" in f else ""))
        elif t == "D":
            out.append("D:" + body[2:80].decode("utf-8", "replace"))
        elif t in "CZS":
            out.append(f"{t}:{body.rstrip(bytes(1)).decode('utf-8', 'replace')}")
        else:
            out.append(t)
    text = " | ".join(out)
    return text if len(text) <= limit else text[:limit] + "..."


def ready_status(msgs):
    return msgs[-1][1] if msgs and msgs[-1][0] == b"Z" else b""


def suggest_item(direct, through, after_reset):
    """The fidelity item that probably explains a difference (for writing KNOWN_DIFFERENCES
    entries; each one is then checked by reading it), or 0 when none does."""
    code = refusal_code(through)
    fields = error_fields(through) or {}
    if code == "SYNTAX_ERROR":
        return 3
    if code and "nested" in fields.get("M", ""):
        return 4
    if code and error_fields(direct) is None:
        return 5
    tags = [(t, b) for t, b in direct + through if t == b"C"]
    if (b"C", b"ROLLBACK\0") in tags and (b"C", b"COMMIT\0") in tags:
        return 2
    if ready_status(direct) == b"E" or (error_fields(direct) or {}).get("C") == "25P02" or \
            (error_fields(direct) or {}).get("M", "").startswith("current transaction is aborted"):
        return 2
    if after_reset:
        return 1
    return 0
