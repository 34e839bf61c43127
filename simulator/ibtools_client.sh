#!/bin/bash
# The client of simulator/ibtools.py's ToolServer: prints what the simulated tool prints.
# Usage: ibtools_client.sh PORT TOOL [ARGS...]  (the server on 127.0.0.1:PORT; TOOL ibnetdiscover or perfquery)
exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
shift
printf '%s\n' "$*" >&3
exec cat <&3
