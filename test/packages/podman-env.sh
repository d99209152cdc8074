# Sourced by the package tests before they call podman.
# Podman asks the runtime for RLIMIT_NOFILE and RLIMIT_NPROC of 1048576 in
# every container; a root without CAP_SYS_RESOURCE (as in some CI sandboxes
# and VMs) cannot raise its own hard limits that far, and runc then fails
# with "error setting rlimits".  The tests give podman this machine's own
# hard limits instead, in a containers.conf of their own (CONTAINERS_CONF),
# which is otherwise the system's: capabilities, seccomp profile and the
# rest stay podman's defaults.
psm_podman_conf() {
	conf=$1
	mkdir -p "$(dirname "$conf")"
	sys=/usr/share/containers/containers.conf
	[ -e /etc/containers/containers.conf ] && sys=/etc/containers/containers.conf
	# The hard limits from /proc (dash has no ulimit -u); NPROC at most
	# pid_max, as no more processes can exist (podman itself runs with that).
	nofile=$(awk '/^Max open files/ { print $5 }' /proc/self/limits)
	nproc=$(awk '/^Max processes/ { print $4 }' /proc/self/limits)
	pidmax=$(cat /proc/sys/kernel/pid_max)
	case $nproc in unlimited) nproc=$pidmax ;; esac
	[ "$nproc" -le "$pidmax" ] || nproc=$pidmax
	case $nofile in unlimited) nofile=1048576 ;; esac
	ul="default_ulimits = [\"nofile=$nofile:$nofile\", \"nproc=$nproc:$nproc\"]"
	if [ -e "$sys" ]; then
		sed "/^\[containers\]/a $ul" "$sys" > "$conf.tmp"
	else
		printf '[containers]\n%s\n' "$ul" > "$conf.tmp"
	fi
	mv "$conf.tmp" "$conf"
	CONTAINERS_CONF=$conf
	export CONTAINERS_CONF
}
