# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""How the collection's modules run a command: one small runner (community.general's CmdRunner, far smaller).

``Runner(module)`` is the ``run(argv) -> (rc, out, err)`` the module_utils planners take:

- an argv list, never a shell string (a string is refused with ``CommandError``);
- the program is found with ``module.get_bin_path`` (which also looks in the sbin folders) unless
  argv[0] is a path; a program that is not installed fails the module with Ansible's
  "Failed to find required executable NAME" or, with ``missing="rc"``, answers
  ``(127, "", "NAME: command not found")`` for callers that record it as an observation;
- ``LC_ALL=C`` (plus the ``environ`` given) so the parsers read untranslated output;
- ``check_rc=True`` raises ``CommandError`` naming the command, its exit status and its message
  (stderr, or stdout when stderr is empty); the module turns it into ``fail_json``.
"""

MISSING_RC = 127
MISSING_MODES = ("fail", "rc")


class CommandError(Exception):
    """A command was refused, or failed where its caller needs it to succeed."""

    def __init__(self, msg, argv=None, rc=None, out="", err=""):
        super(CommandError, self).__init__(msg)
        self.argv = argv
        self.rc = rc
        self.out = out
        self.err = err


def command_text(argv):
    """ARGV as an operator reads it in a message."""
    return " ".join(str(arg) for arg in argv)


class Runner(object):
    """Run argv lists through ``module.run_command`` with ``LC_ALL=C``."""

    def __init__(self, module, environ=None, check_rc=False, missing="fail"):
        if missing not in MISSING_MODES:
            raise ValueError("missing must be one of %s, not %r" % (", ".join(MISSING_MODES), missing))
        self.module = module
        self.environ = dict(environ or {})
        self.environ["LC_ALL"] = "C"
        self.check_rc = check_rc
        self.missing = missing
        self._paths = {}

    def find(self, name, required=False):
        """The path of program NAME, or None when it is not installed (REQUIRED: the module fails)."""
        if "/" in name:
            return name
        if name not in self._paths or (required and self._paths[name] is None):
            self._paths[name] = self.module.get_bin_path(name, required=required)
        return self._paths[name]

    def program(self, name):
        """``run(args)`` for program NAME (argv without the program), or None when NAME is not installed."""
        path = self.find(name)
        if path is None:
            return None
        return lambda args, **kwargs: self([path] + list(args), **kwargs)

    def __call__(self, argv, check_rc=None, **kwargs):
        """Run ARGV; ``(rc, out, err)``. KWARGS go to ``run_command`` (``data``, ``binary_data``, ``encoding``)."""
        if isinstance(argv, (str, bytes)) or not all(isinstance(arg, str) for arg in argv or [None]):
            if self.missing == "rc" and isinstance(argv, (list, tuple)) and not argv:
                return MISSING_RC, "", "(empty command): command not found"
            raise CommandError("a command must be a non-empty argv list of strings, not %r" % (argv,), argv=argv)
        argv = list(argv)
        path = self.find(argv[0], required=self.missing == "fail")
        if path is None:
            return MISSING_RC, "", "%s: command not found" % argv[0]
        rc, out, err = self.module.run_command([path] + argv[1:], environ_update=self.environ, **kwargs)
        if rc != 0 and (self.check_rc if check_rc is None else check_rc):
            detail = err or out or ""
            if isinstance(detail, bytes):
                detail = detail.decode("utf-8", "replace")
            raise CommandError("%s failed (rc=%s): %s" % (command_text(argv), rc, detail.strip()), argv=argv, rc=rc,
                               out=out, err=err)
        return rc, out, err
