"""The environment run_command gives its child: an allow-list, not a
deny-list (docs/security.md, "Commands"). A deny-list of secret-looking names missed
AWS_ACCESS_KEY_ID, STRIPE_KEY, GH_PAT, DATABASE_URL with a password,
SLACK_WEBHOOK_URL, SENTRY_DSN, SSH_AUTH_SOCK ...; naming what a build needs
cannot miss a secret it never heard of.

Passed: what a shell session and common toolchains need to find programs,
libraries, locales and caches (below, with why), plus the names the user
lists in `runCommand.passEnv` (a setting a workspace file can only set once
trusted). Not passed, unless listed there: credentials and anything that
reaches them (API keys, tokens, database URLs, webhooks, proxies with
passwords, the ssh/gpg agent sockets, XDG_RUNTIME_DIR with the keyring and
D-Bus sockets, npm_config_* and PIP_* which can hold registry tokens).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = ["PASSED_NAMES", "PASSED_PATTERNS", "command_environment"]

PASSED_NAMES = frozenset({
    # finding programs, the user and the terminal
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "COLORTERM", "NO_COLOR",
    "FORCE_COLOR", "CLICOLOR", "TZ", "HOSTNAME",
    # locale
    "LANG", "LANGUAGE",
    # temporary files
    "TMPDIR", "TMP", "TEMP",
    # Python: the active environment and interpreter selection
    "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "PYENV_ROOT", "PYENV_VERSION",
    "PYTHONPATH", "PYTHONHOME", "PYTHONIOENCODING", "PYTHONUTF8",
    # JVM, Go, Rust, Node, Ruby
    "JAVA_HOME", "GRADLE_USER_HOME", "MAVEN_HOME", "GOPATH", "GOROOT", "GOCACHE",
    "GOMODCACHE", "GOFLAGS", "GOOS", "GOARCH", "CARGO_HOME", "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN", "NVM_DIR", "NODE_PATH", "NODE_OPTIONS", "GEM_HOME", "GEM_PATH",
    # C/C++ toolchains and build systems
    "CC", "CXX", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "PKG_CONFIG_PATH",
    "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "MAKEFLAGS", "CMAKE_PREFIX_PATH",
    # certificate bundles (paths, not secrets) so TLS works behind corporate CAs
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
})
# Locale categories (LC_ALL, LC_CTYPE, ...) and the XDG base directories
# (not XDG_RUNTIME_DIR: it holds the agent and keyring sockets).
PASSED_PATTERNS = (re.compile(r"^LC_[A-Z_]+$"),
                   re.compile(r"^XDG_(CONFIG|DATA|CACHE|STATE)_HOME$"))


def command_environment(environ: Mapping[str, str], extra: Iterable[str] = ()) -> dict[str, str]:
    """The allow-listed part of `environ`, plus the names in `extra`."""
    wanted = set(extra)
    return {
        name: value for name, value in environ.items()
        if name in PASSED_NAMES or name in wanted
        or any(p.match(name) for p in PASSED_PATTERNS)
    }
