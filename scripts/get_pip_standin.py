"""Stand-in for pip's get-pip.py, used by ansible-test's venv bootstrap.

ansible-test downloads get-pip.py from an Ansible CI file server that this network
cannot reach, and uses ~/.ansible/test/cache/get_pip_<version>.py when it exists.
scripts/setup.sh installs this file there. It bootstraps pip from the interpreter's
own ensurepip, then installs what ansible-test asked for (e.g. ``pip==24.2``) from
the configured package index. ``--no-setuptools``/``--no-wheel`` are get-pip options
that plain ``pip install`` does not know; they are dropped.
"""
import subprocess
import sys

DROP = {"--no-setuptools", "--no-wheel"}


def main():
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"])
    args = [a for a in sys.argv[1:] if a not in DROP]
    subprocess.check_call([sys.executable, "-m", "pip", "install"] + args)


if __name__ == "__main__":
    main()
