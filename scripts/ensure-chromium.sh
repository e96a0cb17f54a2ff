#!/bin/sh
# Install Debian's chromium for the HTML report rendering test, if we can.
# Always exits 0: without chromium that single test skips with a message.
set -u

if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    echo "ensure-chromium: $(command -v chromium || command -v chromium-browser) present"
    exit 0
fi

if [ "$(id -u)" != "0" ]; then
    echo "ensure-chromium: not root; cannot install chromium (the report rendering test will skip)"
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-chromium: no apt-get; cannot install chromium (the report rendering test will skip)"
    exit 0
fi

echo "ensure-chromium: installing chromium with apt-get"
if DEBIAN_FRONTEND=noninteractive apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium \
        >/dev/null; then
    echo "ensure-chromium: installed $(command -v chromium)"
else
    echo "ensure-chromium: apt-get could not install chromium (the report rendering test will skip)"
fi
exit 0
