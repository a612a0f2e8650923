#!/usr/bin/env bash
# Install bubblewrap (bwrap), the sandbox kws runs task code in, where this machine lets us,
# and say what was done. Never fails the caller: without bwrap, kws refuses to run task code
# (or runs it unsandboxed when the reviewer opts out with --no-sandbox).
set -uo pipefail
if command -v bwrap >/dev/null 2>&1; then
  echo "kws setup: bubblewrap present ($(bwrap --version 2>/dev/null || echo bwrap))"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
  else
    echo "kws setup: bubblewrap is missing and this user cannot install packages; install it" \
         "(Debian/Ubuntu: sudo apt-get install bubblewrap). Until then kws refuses to run task code."
    exit 0
  fi
fi
if command -v apt-get >/dev/null 2>&1; then
  echo "kws setup: installing bubblewrap with ${SUDO:+sudo }apt-get"
  $SUDO apt-get install -y -q bubblewrap >/dev/null 2>&1 \
    || { $SUDO apt-get update -q >/dev/null 2>&1 && $SUDO apt-get install -y -q bubblewrap >/dev/null 2>&1; }
elif command -v dnf >/dev/null 2>&1; then
  echo "kws setup: installing bubblewrap with ${SUDO:+sudo }dnf"
  $SUDO dnf install -y -q bubblewrap >/dev/null 2>&1
elif command -v pacman >/dev/null 2>&1; then
  echo "kws setup: installing bubblewrap with ${SUDO:+sudo }pacman"
  $SUDO pacman -S --noconfirm bubblewrap >/dev/null 2>&1
else
  echo "kws setup: no known package manager; install bubblewrap by hand."
  exit 0
fi
if command -v bwrap >/dev/null 2>&1; then
  echo "kws setup: bubblewrap installed ($(bwrap --version))"
else
  echo "kws setup: bubblewrap could not be installed; kws refuses to run task code until it is."
fi
