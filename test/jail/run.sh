#!/bin/bash
# The jail's escape suite: test/jail/run.sh BUILD/helpers
# Runs every case through build/helpers/jailrun (the real jail on the real
# kernel) and checks each effect from outside.  As root it runs the suite,
# then again as nobody (setpriv) with temp dirs owned by nobody.
# The last line is "N passed, N failed"; the exit status is non-zero on any
# failure.
set -u
HELPERS=$(cd "${1:?usage: run.sh BUILD/helpers}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
PASS=0 FAIL=0
# PSM_JAIL_MODE=nsfree: every case runs under build/helpers/dockerrun, which
# applies a container runtime's default rules (no unshare, setns or mount, no
# namespace clone flags, clone3 ENOSYS, CAP_SYS_ADMIN dropped), so the jail
# takes its namespace-free mode (Landlock + seccomp) for real.
MODE=${PSM_JAIL_MODE:-ns}
if [ "$MODE" = nsfree ]; then
	JR=$HELPERS/jailrun-nsfree
	T0=$(mktemp -d /var/tmp/psm-jailrun.XXXXXX)
	chmod 755 "$T0"
	printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$HELPERS/dockerrun" "$HELPERS/jailrun" > "$T0/jailrun"
	chmod 755 "$T0/jailrun"
	JR=$T0/jailrun
else
	JR=$HELPERS/jailrun
fi
WHO="$(id -un) $MODE"
# Inside a container (podman's /run/.containerenv, Docker's /.dockerenv) the
# namespace mode may run without /proc: kernel.py and session.py accept that
# there, and only there.
INCTR=
if [ -e /run/.containerenv ] || [ -e /.dockerenv ]; then INCTR=container; fi

umask 022
# Every project of the suite lies below a directory only the suite's user
# may enter (mode 0700, as mktemp -d makes it, like /root or a CI runner's
# scratch checkout): the sandbox must reach it without the host's
# permissions being loosened, in both modes and as root and as nobody.
T=$(mktemp -d /var/tmp/psm-jail.XXXXXX)
chmod 700 "$T"
# A second project under /tmp: the jail's private /tmp is mounted there, and
# what it allows must not reach a project below it.
TT=$(mktemp -d /tmp/psm-jail.XXXXXX)
chmod 700 "$TT"
# A host process whose command line carries the canary (tokens often ride
# on command lines): no cell may read it.
sh -c 'sleep 300' "psm-canary-$RANDOM" > /dev/null 2>&1 &
HPID=$!
cleanup() {
	[ -n "${LPID:-}" ] && kill "$LPID" 2>/dev/null
	[ -n "${SPID:-}" ] && kill "$SPID" 2>/dev/null
	kill "$HPID" 2>/dev/null
	rm -rf "$T" "$TT" ${T0:+"$T0"} ${STAGE:+"$STAGE"}
}
trap cleanup EXIT

ok()   { PASS=$((PASS + 1)); echo "ok   [$WHO] $1"; }
bad()  { FAIL=$((FAIL + 1)); echo "FAIL [$WHO] $1"; [ -s "$T/out" ] && sed 's/^/     | /' "$T/out" | tail -15; }

# policy NAME fs_read fs_write shell_exec net_access [max_processes] [max_sessions]
policy() {
	cat > "$T/$1.md" <<EOP
---
name: t
description: jail test
permissions:
  fs_read: $2
  fs_write: $3
  shell_exec: $4
  net_access: $5
limits:
  max_processes: ${6:-64}
  max_sessions: ${7:-8}
---
EOP
}

# A project ROOT with a data file, a fake HOME around it with a canary, a
# file outside everything.
HOMED=$T/home
ROOT=$HOMED/proj
WS=$ROOT/workspace
mkdir -p "$HOMED/.ssh" "$WS" "$ROOT/out"
CANARY="CANARY-$RANDOM-$RANDOM"
echo "$CANARY" > "$HOMED/.ssh/id_rsa"
chmod 644 "$HOMED/.ssh/id_rsa"
echo "a,b" > "$ROOT/data.csv"
echo "original" > "$T/outside.txt"
policy default true workspace false false
policy ro true false false false
policy noread false workspace false false
policy list "[data.csv]" "[out]" false false
policy exec true workspace true false
policy net true workspace false true
policy bomb true workspace false false 8 1

# run NAME EXPECTED_RC POLICY SNIPPET ARGS...   (env via ENV=...)
run() {
	local name=$1 want=$2 pol=$3 snip=$4
	shift 4
	env ${ENVX:-} PSM_SECRET="$CANARY" timeout 60 "$JR" "$T/$pol.md" "$ROOT" "$WS" "$HERE/$snip" "$@" > "$T/out" 2>&1
	local rc=$?
	# The namespace-free mode's scratch directory, emptied by jailrun.
	sed -n 's|^jailrun: scratch \(/[a-z/]*tmp/psm-scratch-[A-Za-z0-9]*\)$|\1|p' "$T/out" | xargs -r rmdir
	if [ "$rc" = "$want" ]; then ok "$name"; else echo "     rc=$rc want=$want"; bad "$name"; fi
}

sum_root() { (cd "$ROOT" && find . -path ./workspace -prune -o -print | sort; cat data.csv) | md5sum; }

# --- the stack works; a chart lands in the workspace
run "numpy/pandas/matplotlib + savefig to workspace" 0 default stack.py "$WS"
if head -c 8 "$WS/outputs/chart.png" 2>/dev/null | grep -q PNG; then ok "chart.png written (seen from outside)"; else bad "chart.png written"; fi

# ROOT below a directory only its owner may enter (/root, mkdtemp), twice
# over: the sandbox's uid could not traverse it.  With namespaces the jail
# clones it beforehand; without, a root server's sandbox keeps the
# effective uid 0 without any capability (jail/uid.c).
mkdir -p "$T/private/proj/workspace"
chmod 700 "$T/private"
echo "a,b" > "$T/private/proj/data.csv"
if timeout 60 "$JR" "$T/default.md" "$T/private/proj" "$T/private/proj/workspace" "$HERE/writes.py" \
	"$T/private/proj" "$T/private/proj/workspace" "$T/outside.txt" > "$T/out" 2>&1 &&
	timeout 60 "$JR" "$T/default.md" "$T/private/proj" "$T/private/proj/workspace" "$HERE/perms.py" \
	write yes "$T/private/proj/workspace/w.txt" > "$T/out" 2>&1 && [ -e "$T/private/proj/workspace/w.txt" ]; then
	ok "ROOT below a 0700 directory: works and stays confined"
else
	bad "ROOT below a 0700 directory"
fi

# --- writes outside the workspace
BEFORE=$(sum_root)
run "writes outside the workspace refused" 0 default writes.py "$ROOT" "$WS" "$T/outside.txt"
[ "$(sum_root)" = "$BEFORE" ] && ok "ROOT unchanged (outside)" || bad "ROOT unchanged"
[ "$(cat "$T/outside.txt")" = original ] && [ ! -e "$T/new.txt" ] && ok "outside file unchanged" || bad "outside file unchanged"
[ ! -e "/tmp/outside.txt.private" ] && [ ! -e "/dev/shm/outside.txt.private" ] && ok "private /tmp and /dev/shm not the host's" || bad "private /tmp"
[ ! -e "$ROOT/created-through-link.txt" ] && ok "dangling symlink created nothing" || bad "dangling symlink"

# --- what the host sees: modes, ACLs, links and special files (effects
# checked from outside with hostcheck.py)
cp /usr/bin/id "$ROOT/suid-tool" && chmod 4755 "$ROOT/suid-tool"
run "setuid/setgid/wide modes, umask, ACLs, capabilities refused" 0 default modes.py "$WS" "$ROOT/suid-tool" "$MODE"
python3 "$HERE/hostcheck.py" "$WS" > "$T/out" 2>&1 && ok "workspace: no setuid/setgid, no g/o write, no ACL (outside)" || bad "workspace modes (outside)"
[ "$(stat -c %a "$WS")" = 755 ] && ok "workspace still 755 (outside)" || bad "workspace still 755"
mkdir -p "$WS/outputs"
run "no symlink/FIFO/socket/device/hard link in workspace and outputs/" 0 default special.py "$ROOT/data.csv" "$WS" "$WS/outputs"
run "same with net_access true (sockets allowed)" 0 net special.py "$ROOT/data.csv" "$WS" "$WS/outputs"
run "same in an fs_write-listed directory" 0 list special.py "$ROOT/data.csv" "$ROOT/out"
python3 "$HERE/hostcheck.py" "$WS" "$ROOT/out" > "$T/out" 2>&1 && ok "nothing special left (outside)" || bad "nothing special left (outside)"
ROOT2=$TT/proj
WS2=$ROOT2/workspace
mkdir -p "$WS2/outputs" "$ROOT2/out"
echo "a,b" > "$ROOT2/data.csv"
jr2() { env ${ENVX:-} timeout 60 "$JR" "$T/$1.md" "$ROOT2" "$WS2" "$HERE/$2" "${@:3}" > "$T/out" 2>&1; }
jr2 default special.py "$ROOT2/data.csv" "$WS2" "$WS2/outputs" && ok "ROOT under /tmp: no special files in workspace and outputs/" || bad "ROOT under /tmp: special files"
jr2 net special.py "$ROOT2/data.csv" "$WS2" "$WS2/outputs" && ok "ROOT under /tmp, net_access true: same" || bad "ROOT under /tmp, net true: special files"
jr2 list special.py "$ROOT2/data.csv" "$ROOT2/out" && ok "ROOT under /tmp: fs_write-listed dir: same" || bad "ROOT under /tmp: listed dir"
jr2 default modes.py "$WS2" "$ROOT/suid-tool" "$MODE" && ok "ROOT under /tmp: modes refused" || bad "ROOT under /tmp: modes"
python3 "$HERE/hostcheck.py" "$WS2" "$ROOT2/out" > "$T/out" 2>&1 && ok "ROOT under /tmp: nothing left (outside)" || bad "ROOT under /tmp: nothing left (outside)"

# --- secrets
run "canary in fake HOME, environment, host processes' command lines and status hidden" 0 default secrets.py "$HOMED/.ssh/id_rsa" "$(echo "$CANARY" | rev)" "$MODE" "$HPID"

# Well-known secrets under a readable ROOT, at any depth, and the policy's
# own fs_read_deny globs: refused; everything else still readable.
SP=$T/sproj
SECRETS=".ssh/id_rsa .gnupg/pubring.kbx .aws/credentials .azure/az.json .config/gcloud/adc.json
.kube/config .docker/config.json .netrc .git-credentials .npmrc .pypirc .env .env.local
tls/server.pem tls/server.key keys/id_rsa keys/id_rsa.pub keys/id_ed25519
src/deep/.env src/deep/.config/gcloud/x.json src/deep/api.key private/notes.txt db/app.sqlite"
for f in $SECRETS ok.csv src/ok.py src/deep/ok.txt .docker/other.json .config/other.txt envs/x.txt; do
	mkdir -p "$SP/$(dirname "$f")"; echo "$CANARY" > "$SP/$f"
done
mkdir -p "$SP/workspace"
cat > "$T/deny.md" <<EOP
---
name: t
description: jail test
permissions:
  fs_read: true
  fs_write: workspace
  shell_exec: false
  net_access: false
  fs_read_deny: [private, "db/*.sqlite"]
---
EOP
policy denylist "[src, tls]" workspace false false
hid() { env ${ENVX:-} timeout 60 "$JR" "$T/$1.md" "$SP" "$SP/workspace" "$HERE/hidden.py" "${@:2}" > "$T/out" 2>&1; }
# shellcheck disable=SC2086
hid deny $SECRETS -- ok.csv src/ok.py src/deep/ok.txt .docker/other.json .config/other.txt envs/x.txt &&
	ok "each secret pattern and fs_read_deny glob refused under ROOT, the rest readable" || bad "secrets under ROOT"
hid denylist tls/server.pem tls/server.key src/deep/.env src/deep/api.key -- src/ok.py src/deep/ok.txt &&
	ok "secrets in fs_read-listed directories refused" || bad "secrets in listed dirs"
grep -q "$CANARY" "$T/out" && bad "canary in the output" || ok "no secret in the output"
if [ "$MODE" = nsfree ]; then
	ENVX="PSM_JAIL_DISABLE=landlock" hid deny .env -- ok.csv; [ $? = 3 ] && grep -q "only be hidden with Landlock" "$T/out" &&
		ok "secrets without Landlock: refused to run, says why" || bad "secrets without Landlock"
else
	# The mount tree hides them itself (an empty mount over each).
	ENVX="PSM_JAIL_DISABLE=landlock" hid deny .env .ssh/id_rsa db/app.sqlite -- ok.csv src/ok.py &&
		ok "secrets without Landlock: the mount tree alone hides them" || bad "secrets without Landlock (mount tree)"
fi
# A project under /tmp with secrets (a CI checkout, a scratch project): the
# jail's private /tmp is readable as a whole, and a Landlock rule covers
# what is mounted below it, so the mount tree itself hides them (an empty
# mount over each).  Every pattern, through the project's own path.
TSP=$TT/sproj
cp -a "$SP" "$TSP"
hidt() { env ${ENVX:-} timeout 60 "$JR" "$T/$1.md" "$TSP" "$TSP/workspace" "$HERE/hidden.py" "${@:2}" > "$T/out" 2>&1; }
# shellcheck disable=SC2086
hidt deny $SECRETS -- ok.csv src/ok.py src/deep/ok.txt .docker/other.json .config/other.txt envs/x.txt &&
	ok "secrets in a project under /tmp: each refused, the rest readable" || bad "secrets under /tmp"
grep -q "$CANARY" "$T/out" && bad "canary in the output (project under /tmp)" || ok "no secret in the output (project under /tmp)"
# ROOT = the home directory is not a project.
mkdir -p "$HOMED/workspace"
env HOME="$HOMED" timeout 60 "$JR" "$T/default.md" "$HOMED" "$HOMED/workspace" "$HERE/perms.py" read no "$HOMED/.ssh/id_rsa" > "$T/out" 2>&1
[ $? = 3 ] && grep -q "start the server with --root" "$T/out" && ok "ROOT = HOME: refused, says to pass --root" || bad "ROOT = HOME refused"
env HOME="$HOMED" timeout 60 "$JR" --check "$T/default.md" "$HOMED" "$HOMED/workspace" > "$T/out" 2>&1
[ $? = 1 ] && grep -q "not a project" "$T/out" && ok "ROOT = HOME: --check exits 1" || bad "ROOT = HOME: --check"

# --- network
LOG=$T/heard; : > "$LOG"
UPATH=$T/listener.sock
ABS="psm-jail-test-$$"
python3 "$HERE/listener.py" "$LOG" "$UPATH" "$ABS" > "$T/ports" 2>/dev/null &
LPID=$!
for _ in $(seq 50); do [ -s "$T/ports" ] && break; sleep 0.1; done
read -r TCP UDP < "$T/ports"
run "network refused (tcp, udp, urllib, dns, netlink, packet, raw, unix, io_uring)" 0 default net.py "$TCP" "$UDP" "$UPATH" "$ABS"
sleep 0.2
[ ! -s "$LOG" ] && ok "listener heard nothing" || { cat "$LOG" > "$T/out"; bad "listener heard nothing"; }

# Host unix sockets (stream and datagram, pathname and abstract) inside ROOT,
# in the workspace and in a directory the policy lists under fs_read: not
# reachable with net_access false, by connect, sendto or sendmsg.
HLOG=$T/heard-unix; : > "$HLOG"
mkdir -p "$ROOT/sockdir"
policy listsock "[data.csv, sockdir]" workspace false false
python3 "$HERE/hostsock.py" "$HLOG" "$ROOT/dev$$" "$WS/ctl$$" "$ROOT/sockdir/lsp$$" "$TT/hs$$" > "$T/sready" 2>/dev/null &
SPID=$!
for _ in $(seq 50); do [ -s "$T/sready" ] && break; sleep 0.1; done
run "host unix sockets in ROOT and workspace unreachable" 0 default sock.py "$MODE" "$ROOT/dev$$" "$WS/ctl$$" "$TT/hs$$"
run "host unix socket in an fs_read-listed dir unreachable" 0 listsock sock.py "$MODE" "$ROOT/sockdir/lsp$$"
ENVX="PSM_JAIL_DISABLE=netns" run "same without a network namespace" 0 default sock.py "$MODE" "$ROOT/dev$$" "$WS/ctl$$"
sleep 0.2
[ ! -s "$HLOG" ] && ok "unix listeners heard nothing (outside)" || { cat "$HLOG" > "$T/out"; bad "unix listeners heard nothing"; }
kill "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; SPID=
rm -f "$ROOT"/dev$$.* "$WS"/ctl$$.* "$ROOT"/sockdir/lsp$$.* "$TT"/hs$$.*

# --- programs
run "programs refused (subprocess, os.system, posix_spawn, fork+exec, ctypes execve, memfd execveat)" 0 default exec.py "$WS/marker"
[ ! -e "$WS/marker" ] && ok "marker not created" || bad "marker not created"

# --- kernel surface, other processes, limits
run "kernel surface refused; NoNewPrivs 1, Seccomp 2, CapEff 0" 0 default kernel.py "$MODE" $INCTR
run "x32 syscall kills the process (SIGSYS)" 159 default x32.py
# Without a user namespace RLIMIT_NPROC counts every process of the
# sandbox's uid on the host (nobody's: other servers' sandboxes, other test
# runs): the namespace-free pass leaves room for them.
if [ "$MODE" = nsfree ]; then
	policy bombwide true workspace false false 40 2
	run "fork bomb bounded (max_processes 40 x 2 sessions, uid-wide)" 0 bombwide bomb.py fork
	run "thread bomb bounded" 0 bombwide bomb.py thread
else
	run "fork bomb bounded (max_processes 8 x 1 session)" 0 bomb bomb.py fork
	run "thread bomb bounded" 0 bomb bomb.py thread
fi
run "session: own /proc readable, zygote not signalable" 0 default session.py $INCTR
# What the sandbox's effective uid owns: all of root's files and processes
# for a root server without namespaces (jail/uid.c).
mkdir -p "$T/rootonly"; chmod 700 "$T/rootonly"
echo "$CANARY" > "$T/rootonly/secret"; chmod 600 "$T/rootonly/secret"
run "root-only files, leases, modifying ioctls, inotify, /proc writes, host signals refused" 0 default owned.py "$MODE" "$T/rootonly/secret" "$ROOT/data.csv" "$T/rootonly" "$HPID"

# A host process of the sandbox's own uid (nobody's when root runs the
# suite), and the jail's zygote: the cell may not change their scheduling,
# priority, placement or identity (seccomp: pid 0 only, no pidfd_open).
# Checked from outside on the host process afterwards.
if [ "$(id -u)" = 0 ]; then
	setpriv --reuid=65534 --regid=65534 --clear-groups sleep 600 &
else
	sleep 600 &
fi
HPID=$!
sleep 0.2
sched_state() { echo "$(taskset -p "$HPID" | sed 's/.*: //') $(ps -o ni= -p "$HPID") $(ionice -p "$HPID") $(chrt -p "$HPID" | tr '\n' ' ') $(cat /proc/"$HPID"/oom_score_adj)"; }
SCHED_BEFORE=$(sched_state)
run "scheduling, priority, placement and pidfds of other processes refused" 0 default sched.py "$MODE" "$HPID"
[ "$(sched_state)" = "$SCHED_BEFORE" ] && ok "host process's affinity, nice, ionice, policy, oom_score_adj unchanged (outside: $SCHED_BEFORE)" ||
	{ echo "before: $SCHED_BEFORE after: $(sched_state)" > "$T/out"; bad "host process's scheduling unchanged (outside)"; }
kill "$HPID" 2>/dev/null; wait "$HPID" 2>/dev/null

# --- each permission both ways
run "fs_read true: ROOT readable" 0 default perms.py read yes "$ROOT/data.csv"
run "fs_read false: ROOT hidden" 0 noread perms.py read no "$ROOT/data.csv"
run "fs_read false: workspace still writable" 0 noread perms.py write yes "$WS/f.txt"
run "fs_read list: listed file readable" 0 list perms.py read yes "$ROOT/data.csv"
run "fs_write list: listed dir writable" 0 list perms.py write yes "$ROOT/out/f.txt"
run "fs_write list: workspace not writable" 0 list perms.py write no "$WS/g.txt"
run "fs_write workspace: workspace writable" 0 default perms.py write yes "$WS/h.txt"
run "fs_write false: workspace not writable" 0 ro perms.py write no "$WS/i.txt"
run "fs_write false: private scratch space still writable" 0 ro perms.py write yes '$TMPDIR/scratch'
[ ! -e "$WS/i.txt" ] && [ ! -e "$WS/g.txt" ] && ok "nothing written (outside)" || bad "nothing written"
run "shell_exec false: programs refused" 0 default perms.py exec no
run "shell_exec true: programs run" 0 exec perms.py exec yes
run "shell_exec true: programs still jailed" 0 exec perms.py exec-jailed yes "$HOMED/.ssh/id_rsa"
: > "$LOG"
run "net_access false: tcp refused" 0 default perms.py net no "$TCP"
run "net_access true: tcp allowed" 0 net perms.py net yes "$TCP"
sleep 0.2
grep -q "HEARD tcp" "$LOG" && ok "listener heard the allowed connection" || bad "listener heard the allowed connection"

# --- fail closed (PSM_JAIL_DISABLE only removes layers)
ENVX="PSM_JAIL_DISABLE=mountns,landlock" run "no mount ns and no Landlock: refused to run" 3 default stack.py "$WS"
grep -q "fs_read and fs_write cannot be enforced" "$T/out" && ok "says why" || bad "says why"
ENVX="PSM_JAIL_DISABLE=seccomp" run "no seccomp: refused to run" 3 default stack.py "$WS"
BEFORE=$(sum_root)
if [ "$MODE" = nsfree ]; then
	ENVX="PSM_JAIL_DISABLE=landlock JAILRUN_REPORT=1" run "no namespaces and no Landlock: refused to run" 3 default writes.py "$ROOT" "$WS" "$T/outside.txt"
	grep -q "remedy: .*Landlock: a kernel of 5.13" "$T/out" && ok "says the remedy" || bad "says the remedy"
else
	ENVX="PSM_JAIL_DISABLE=landlock" run "mount tree alone still confines writes" 0 default writes.py "$ROOT" "$WS" "$T/outside.txt"
fi
ENVX="PSM_JAIL_DISABLE=mountns" run "no mount ns: the Landlock + seccomp mode hides the canary" 0 default perms.py read no "$HOMED/.ssh/id_rsa"
if [ "$MODE" = nsfree ]; then
	# Kernels before 6.12 (Landlock ABI 5 and lower: Ubuntu 24.04 has 4)
	# lack the signal scope: without a pid namespace, refused.
	ENVX="PSM_JAIL_DISABLE=landlock-abi-5 JAILRUN_REPORT=1" run "Landlock ABI 5 without namespaces: refused to run" 3 default perms.py read yes "$ROOT/data.csv"
	grep -q "remedy: .*6.12" "$T/out" && ok "says the remedy (a newer kernel, or namespaces)" || bad "says the remedy (ABI 5)"
else
	ENVX="PSM_JAIL_DISABLE=landlock-abi-3" run "Landlock ABI 3 with namespaces: still runs, confined" 0 default writes.py "$ROOT" "$WS" "$T/outside.txt"
fi
ENVX="PSM_JAIL_DISABLE=mountns JAILRUN_FORCE=1" run "Landlock alone still hides the canary" 0 default perms.py read no "$HOMED/.ssh/id_rsa"
ENVX="PSM_JAIL_DISABLE=mountns JAILRUN_FORCE=1" run "Landlock alone still refuses writes to ROOT" 0 default perms.py write no "$ROOT/data.csv"
ENVX="PSM_JAIL_DISABLE=mountns JAILRUN_FORCE=1" run "Landlock alone: workspace writable" 0 default perms.py write yes "$WS/ll.txt"
[ "$(sum_root)" = "$BEFORE" ] && [ "$(cat "$T/outside.txt")" = original ] && ok "ROOT unchanged after fallbacks" || bad "ROOT unchanged after fallbacks"

# Without user namespaces root still builds the namespaces itself (then
# drops to the sandbox uid); an unprivileged user cannot: not enforceable.
if [ "$(id -u)" = 0 ]; then
	ENVX="PSM_JAIL_DISABLE=userns" run "no user ns, as root: namespaces built as root, writes refused" 0 default writes.py "$ROOT" "$WS" "$T/outside.txt"
	ENVX="PSM_JAIL_DISABLE=userns" run "no user ns, as root: NoNewPrivs, Seccomp, caps, uid" 0 default kernel.py "$MODE"
else
	ENVX="PSM_JAIL_DISABLE=userns" run "no user ns, unprivileged: Landlock + seccomp mode runs" 0 default perms.py read yes "$ROOT/data.csv"
fi

# --- the namespace-free mode's own rules (metadata, IPC, unix sockets,
# scratch), checked from outside too: data.csv's mode, times and xattrs.
if [ "$MODE" = nsfree ]; then
	META=$(stat -c '%a %u %g %X %Y %Z' "$ROOT/data.csv")
	run "metadata, SysV IPC, mqueues, unix sockets refused; scratch private" 0 default nsfree.py "$ROOT" "$WS"
	[ "$(stat -c '%a %u %g %X %Y %Z' "$ROOT/data.csv")" = "$META" ] && ok "data.csv's mode, owner and times unchanged (outside)" || bad "data.csv metadata unchanged"
	python3 -c 'import os, sys; sys.exit(1 if os.listxattr(sys.argv[1]) else 0)' "$ROOT/data.csv" && ok "no xattr on data.csv (outside)" || bad "no xattr on data.csv"
	SCR=$(sed -n 's/^scratch //p' "$T/out")
	# Emptied by jailrun from inside, then removed by run() from outside
	# (rmdir: only an empty directory goes).
	[ -n "$SCR" ] && [ ! -e "$SCR" ] && ok "scratch directory emptied and removed" || bad "scratch directory emptied and removed ($SCR)"

	[ ! -e /tmp/psm-nsfree-probe ] && ok "host /tmp untouched" || bad "host /tmp untouched"
fi

# --- --check
if timeout 60 "$JR" --check "$T/default.md" "$ROOT" "$WS" > "$T/out" 2>&1 && [ "$(grep -c "refused: " "$T/out")" = 3 ]; then
	ok "--check: enforceable, 3 probes refused"
else
	bad "--check"
fi
# The debugging knob: both filters (the allow-list, the stacked refusals)
# written out before they are loaded, though the environment is replaced.
if PSM_SECCOMP_PFC=1 timeout 60 "$JR" --check "$T/default.md" "$ROOT" "$WS" > "$T/out" 2>&1 &&
	[ "$(grep -c "^# pseudo filter code start" "$T/out")" = 2 ] && grep -q 'filter for syscall "clone3"' "$T/out"; then
	ok "PSM_SECCOMP_PFC: both seccomp filters printed"
else
	bad "PSM_SECCOMP_PFC: both seccomp filters printed"
fi
if ! PSM_JAIL_DISABLE=mountns,landlock timeout 60 "$JR" --check "$T/default.md" "$ROOT" "$WS" > "$T/out" 2>&1; then
	ok "--check fails when a needed layer is missing"
else
	bad "--check fails when a needed layer is missing"
fi

kill "$LPID" 2>/dev/null; wait "$LPID" 2>/dev/null; LPID=

# As root: the same suite again as an unprivileged user.
if [ "$(id -u)" = 0 ] && [ -z "${PSM_JAIL_INNER:-}" ]; then
	echo "== again as nobody"
	# nobody may not be able to reach the checkout (a clone under /root or
	# a mode-700 home directory): it runs a copy of the suite and of the
	# helpers, staged in $T (mode 755), and says so when even that copy
	# is out of its reach (a noexec /var/tmp, say) instead of failing
	# every case with "No such file or directory".
	STAGE=$(mktemp -d /var/tmp/psm-jailstage.XXXXXX)
	chmod 755 "$STAGE"
	mkdir -p "$STAGE/jail" "$STAGE/helpers"
	cp -p "$HERE"/*.sh "$HERE"/*.py "$STAGE/jail/"
	cp -p "$HELPERS"/* "$STAGE/helpers/"
	chmod -R go+rX "$STAGE"
	chmod 755 "$STAGE/jail/run.sh"
	if ! setpriv --reuid=65534 --regid=65534 --clear-groups \
		sh -c 'test -r "$1/jail/run.sh" && test -x "$1/jail/run.sh" && test -x "$1/helpers/jailrun"' sh "$STAGE"; then
		echo "FAIL [nobody] cannot run the suite as nobody: $STAGE (a copy of test/jail and the helpers) is not readable and executable by uid 65534; mount /var/tmp without noexec or run from a directory nobody can enter"
		FAIL=$((FAIL + 1))
	else
		PSM_JAIL_INNER=1 setpriv --reuid=65534 --regid=65534 --clear-groups --reset-env \
			env PSM_JAIL_INNER=1 PSM_JAIL_MODE="$MODE" PATH=/usr/bin:/bin "$STAGE/jail/run.sh" "$STAGE/helpers" > "$T/inner" 2>&1
		grep -v "passed, .* failed$" "$T/inner"
		read -r ip _ if _ < <(tail -1 "$T/inner")
		PASS=$((PASS + ${ip:-0})); FAIL=$((FAIL + ${if:-1}))
	fi
fi
# Then everything again (as root, then as nobody) in the namespace-free mode.
if [ -z "${PSM_JAIL_INNER:-}" ] && [ -z "${PSM_JAIL_MODE:-}" ]; then
	echo "== again without namespaces (Landlock + seccomp), under dockerrun"
	PSM_JAIL_MODE=nsfree "$0" "$HELPERS" > "$T/nsfree" 2>&1
	grep -v "passed, .* failed$" "$T/nsfree"
	read -r ip _ if _ < <(tail -1 "$T/nsfree")
	PASS=$((PASS + ${ip:-0})); FAIL=$((FAIL + ${if:-1}))
fi
echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
