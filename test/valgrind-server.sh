#!/bin/sh
# The server under valgrind memcheck, for `make valgrind`: it runs the
# integration suite with this wrapper as the binary.  The zygote is a fresh
# exec of the binary (not a fork), so only the server is under valgrind;
# any error or leak makes the server exit 99, which the suite's shutdown
# checks see.
exec valgrind --quiet --error-exitcode=99 --leak-check=full \
	--show-leak-kinds=definite,indirect,possible \
	--errors-for-leak-kinds=definite,indirect,possible \
	--trace-children=no "${PSM_VALGRIND_BIN:?}" "$@"
