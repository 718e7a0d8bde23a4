#!/bin/sh
# Runs the command like the official redis image does: arguments that start with "-" go to
# redis-server, and redis-server runs with protected mode off (the container's port is
# what guards it), also when the command names its own arguments.
set -e
if [ "${1#-}" != "$1" ]; then
	set -- redis-server "$@"
fi
if [ "$1" = redis-server ]; then
	shift
	exec redis-server "$@" --protected-mode no
fi
exec "$@"
