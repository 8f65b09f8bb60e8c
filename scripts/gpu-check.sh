#!/usr/bin/env bash
# gpu-check.sh: one short end-to-end check of the executor on a GPU host
# (issue #6). It builds greffe, starts a node and an executor here (with a
# host policy allowing exactly the two runs below: issue #20), registers
# the executor's key under an approval, requests
#   1. a run of a small GPU benchmark (a bf16 matrix product with the
#      Python/PyTorch found here, printing "metric tflops ..."; without
#      PyTorch or CUDA it says so and exits non-zero, which is recorded),
#   2. a resource snapshot (a run of nvidia-smi's GPU query), and
#   3. a run the policy does not list (/bin/sh -c id: what any writer ran
#      as root before issue #20), which must come back refused_by_host,
# then verifies each signed result against the executor's registered key
# (`greffe executor verify`, plus `greffe verify` of the whole log when that
# command exists) and prints a summary. It must finish in under 3 minutes.
#
# Usage: scripts/gpu-check.sh [--fake-gpu] [--bin FILE] [--out DIR] [--keep]
#   --bin FILE  use this greffe binary instead of building one (a GPU host
#               without Go: build it elsewhere, copy it over)
#   --fake-gpu  put fixtures/fake-gpu/present first on PATH (a machine without
#               a GPU can run the whole check; the benchmark reports absence)
#   --out DIR   copy the results (JSON) and logs to DIR
#   --keep      keep the work folder (node data, key, logs)
# Exit: 0 every result recorded and verified; 1 a result missing or not
# verified; 2 could not run.
set -euo pipefail

fake=0 out="" keep=0 bin=""
while [ $# -gt 0 ]; do
	case "$1" in
	--fake-gpu) fake=1 ;;
	--out) out="$2"; shift ;;
	--bin) bin="$2"; shift ;;
	--keep) keep=1 ;;
	-h|--help) sed -n '2,26p' "$0"; exit 0 ;;
	*) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done

root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/greffe-gpu-check.XXXXXX")"
start_s=$(date +%s)
deadline=$((start_s + 170)) # leave room under the 3-minute bound
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	if [ -n "$out" ]; then
		mkdir -p "$out"
		cp "$work"/*.log "$work"/*.json "$out"/ 2>/dev/null || true
	fi
	if [ "$keep" = 1 ]; then echo "work folder kept: $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
say() { printf '%s gpu-check: %s\n' "$(date -u +%H:%M:%S)" "$*"; }
die() { say "$*" >&2; exit "${2:-2}"; }

if [ "$fake" = 1 ]; then
	export PATH="$root/fixtures/fake-gpu/present:$PATH"
	say "fake GPU: $(command -v nvidia-smi)"
fi

if [ -n "$bin" ]; then
	[ -x "$bin" ] || die "--bin $bin: not an executable file"
	greffe="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
	say "using $greffe (prebuilt)"
else
	say "building greffe"
	(cd "$root" && go build -o "$work/greffe" ./cmd/greffe) || die "go build failed"
	greffe="$work/greffe"
fi

say "starting a node"
"$greffe" serve --data "$work/data" --http 127.0.0.1:0 --log-level warn >"$work/serve.log" 2>&1 &
pids+=($!)
url=""
until url="$(grep -so 'serving http://[^ ]*' "$work/serve.log" | head -1 | cut -d' ' -f2)" && [ -n "$url" ]; do
	[ "$(date +%s)" -lt $((start_s + 60)) ] || die "the node did not start: $(cat "$work/serve.log")"
	sleep 0.2
done
say "node at $url"

# send NAME JSON: one command, through `greffe cmd` when it exists, else
# POST /v1/commands.
send() {
	if "$greffe" cmd --help >/dev/null 2>&1; then
		"$greffe" cmd "$1" --server "$url" --data "$2" >>"$work/commands.log" 2>&1
	else
		local id
		id="$(cat /proc/sys/kernel/random/uuid)"
		curl -fsS -X POST "$url/v1/commands" -H 'Content-Type: application/json' \
			-d "{\"command\":\"$1\",\"id\":\"$id\",\"actor\":\"gpu-check\",\"data\":$2}" >>"$work/commands.log" 2>&1
	fi || die "command $1 failed: $(tail -3 "$work/commands.log")"
}

host="gpu-check"
key="$work/keys/executor.key"
exec_flags=(--server "$url" --key "$key" --host-id "$host" --id "$host")
"$greffe" executor key "${exec_flags[@]}" >"$work/key.log"
say "executor key $(grep '^key' "$work/key.log" | awk '{print $2}') (created, mode $(stat -c %a "$key"))"
expires="$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)"
send GrantApproval "{\"approval_id\":\"reg-$host\",\"approver\":\"gpu-check\",\"action\":\"activation\",\"subject\":\"executor-$host\",\"uses\":1,\"expires_at\":\"$expires\"}"
"$greffe" executor register "${exec_flags[@]}" --approval "reg-$host" >>"$work/key.log"
say "key registered under approval reg-$host"

python="$(command -v python3 || command -v python || true)"
if [ -n "$python" ]; then
	python="$("$python" -c 'import sys; print(sys.executable)')" # the real interpreter, not a shim
fi
cat >"$work/bench.py" <<'EOF'
# A small GPU benchmark: a bf16 (or fp16) matrix product, timed after a
# warm-up; prints "metric NAME VALUE UNIT" lines for the executor.
import sys, time
try:
    import torch
except Exception as e:  # absence is reported, never hidden
    print(f"torch absent: {e}")
    print("metric torch_available 0")
    sys.exit(3)
print(f"torch {torch.__version__}")
if not torch.cuda.is_available():
    print("CUDA absent: torch.cuda.is_available() is False")
    print("metric cuda_available 0")
    sys.exit(4)
dev = torch.device("cuda")
dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
n, iters = 8192, 50
a = torch.randn(n, n, device=dev, dtype=dtype)
b = torch.randn(n, n, device=dev, dtype=dtype)
for _ in range(5):
    a @ b
torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(iters):
    c = a @ b
torch.cuda.synchronize()
dt = time.perf_counter() - t0
print(f"device {torch.cuda.get_device_name(0)}, {dtype}, n={n}, {iters} products in {dt:.3f}s")
print(f"metric tflops {2 * n**3 * iters / dt / 1e12:.2f} TFLOP/s")
print(f"metric matmul_n {n}")
print(f"metric matmul_ms {1000 * dt / iters:.4f} ms")
print(f"metric torch_max_allocated_mib {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB")
EOF

if [ -n "$python" ]; then
	bench_argv="[\"$python\", \"$work/bench.py\"]"
else
	bench_argv='["python3", "-c", "print(1)"]' # recorded as start_failed: no Python here
fi
smi_argv='["nvidia-smi", "--query-gpu=name,driver_version,memory.total,memory.used,utilization.gpu", "--format=csv,noheader,nounits"]'

# The host's policy: exactly these two runs; nothing hashed, nothing
# probed, and no approval stands in for it (ignore_approvals: the node
# here has no tokens, so anyone could approve). Runs as root only when
# this script runs as root, said loudly.
root_runs=false
if [ "$(id -u)" = 0 ]; then
	root_runs=true
	say "running as root: the host policy sets allow_root_runs (its two runs execute as root)"
fi
cat >"$work/host-policy.json" <<EOF
{
  "runs": [
    {"name": "bench", "argv": $bench_argv},
    {"name": "snapshot", "argv": $smi_argv}
  ],
  "allow_root_runs": $root_runs,
  "ignore_approvals": true
}
EOF
chmod 600 "$work/host-policy.json" # a policy others may write is refused
"$greffe" executor "${exec_flags[@]}" --host-policy "$work/host-policy.json" --lease 20s --log-level info >"$work/executor.log" 2>&1 &
pids+=($!)

bench_id="bench-$(date +%s)"
snap_id="snapshot-$(date +%s)"
shell_id="shell-$(date +%s)"
send RequestMeasurement "{\"measurement_id\":\"$bench_id\",\"host\":\"$host\",\"kind\":\"run\",\"argv\":$bench_argv,\"timeout\":\"120s\",\"output_cap_bytes\":16384,\"purpose\":\"gpu-check benchmark\"}"
send RequestMeasurement "{\"measurement_id\":\"$snap_id\",\"host\":\"$host\",\"kind\":\"run\",\"argv\":$smi_argv,\"timeout\":\"30s\",\"output_cap_bytes\":16384,\"purpose\":\"gpu-check resource snapshot\"}"
send RequestMeasurement "{\"measurement_id\":\"$shell_id\",\"host\":\"$host\",\"kind\":\"run\",\"argv\":[\"/bin/sh\",\"-c\",\"id > $work/pwned; id\"],\"timeout\":\"30s\",\"output_cap_bytes\":16384,\"purpose\":\"gpu-check: a run the host policy does not list\"}"
say "requested $bench_id (python: ${python:-none}), $snap_id and $shell_id (not in the host policy)"

# wait_verified ID: poll (an external process) until the result is recorded
# and verified, within the deadline.
status=0
wait_verified() {
	local rc
	while :; do
		rc=0
		"$greffe" executor verify "$1" --server "$url" >"$work/$1.txt" 2>&1 || rc=$?
		case "$rc" in
		0) "$greffe" executor verify "$1" --server "$url" --json >"$work/$1.json"; return 0 ;;
		2) ;; # not recorded yet
		*) say "$1: signature NOT verified: $(cat "$work/$1.txt")"; status=1; return 1 ;;
		esac
		if [ "$(date +%s)" -ge "$deadline" ]; then
			say "$1: no result before the deadline; executor log:"; tail -20 "$work/executor.log"; status=1; return 1
		fi
		sleep 0.5
	done
}
wait_verified "$bench_id" || true
wait_verified "$snap_id" || true
wait_verified "$shell_id" || true
if grep -q '"outcome": *"refused_by_host"' "$work/$shell_id.json" 2>/dev/null && [ ! -e "$work/pwned" ]; then
	say "$shell_id: refused by the host policy, not run (signed, verified)"
else
	say "$shell_id: NOT refused by the host policy: $(cat "$work/$shell_id.txt" 2>/dev/null)"; status=1
fi

if "$greffe" verify --help >/dev/null 2>&1; then
	if "$greffe" verify --server "$url" >"$work/verify.log" 2>&1; then
		say "greffe verify: the whole log verifies ($(tail -1 "$work/verify.log"))"
	else
		say "greffe verify FAILED: $(tail -5 "$work/verify.log")"; status=1
	fi
fi

echo
echo "== gpu-check summary ($(( $(date +%s) - start_s ))s, fake GPU: $([ "$fake" = 1 ] && echo yes || echo no)) =="
for id in "$bench_id" "$snap_id" "$shell_id"; do
	echo "-- $id"
	cat "$work/$id.txt" 2>/dev/null || echo "(no result)"
done
tflops="$(grep -h '^metric      tflops' "$work/$bench_id.txt" 2>/dev/null | awk '{print $3, $4}' || true)"
echo
if [ -n "$tflops" ]; then
	echo "benchmark: $tflops (signed by the executor, verified)"
else
	echo "benchmark: no tflops measured (see the benchmark's output above: PyTorch or CUDA absent?)"
fi
exit "$status"
