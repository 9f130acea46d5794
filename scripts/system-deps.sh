#!/usr/bin/env bash
# Installs the Debian packages the test suite needs, only where they are missing.
set -euo pipefail
need=()
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
[ -n "$pg_bin" ] && [ -x "$pg_bin/initdb" ] || need+=(postgresql)
# Browser tests drive Debian's Chromium through Playwright (never a browser download).
[ -x /usr/bin/chromium ] || need+=(chromium)
[ -x /usr/bin/chromedriver ] || need+=(chromium-driver)
# The report's LaTeX tables are compiled by a test (booktabs is in the recommended set, not in base).
command -v pdflatex >/dev/null || need+=(texlive-latex-base)
kpsewhich booktabs.sty >/dev/null 2>&1 || need+=(texlive-latex-recommended)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "system-deps: missing ${need[*]}; install them (apt-get install ${need[*]}) or run as root." >&2
  exit 1
fi
echo "system-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}"
