#!/usr/bin/env python3
"""Renders the Grafana dashboard metrics/grafana/hy-overview.json to a PNG
from a real run, the way Grafana lays it out, without Grafana.

Every panel's own PromQL (`targets[].expr`, dashboard variables substituted
as Grafana substitutes them) is evaluated with Prometheus's HTTP API
(`query_range`, or `query` for an instant target) and drawn with matplotlib
at the panel's `gridPos` on Grafana's 24-column grid: rows as headers,
timeseries as lines with the legend from `legendFormat`, stat panels as big
numbers (last non-null value), bar gauges as bars, every axis and value in
the panel's unit. It then prints which panels had no data.

Three ways to run it:

  # Its own short run: makes the demo's prompts, runs `hyctl train
  # --config configs/demo.yaml --metrics-port 0` on 2 ranks, starts a
  # Prometheus with metrics/prometheus.yml (RUN_ROOT and the intervals
  # filled in a temporary copy) and renders the run when it ends; with
  # --kill-worker-at, one worker is killed (kill -9) and the restarted
  # workers recover (the Recovery row; docs/dashboard.png is one).
  scripts/render-dashboard.py --kill-worker-at 60 --out docs/dashboard.png

  # A run that is going on: starts a Prometheus on its targets
  # (RUN_ROOT/prometheus-targets.json), scrapes it for --minutes, renders.
  scripts/render-dashboard.py --run-root runs/a --minutes 5

  # A Prometheus that already scrapes hy: renders its last --minutes.
  scripts/render-dashboard.py --prometheus http://127.0.0.1:9090 --minutes 30

Needs Debian's `prometheus` (scripts/install-deps.sh) unless --prometheus
is given, matplotlib, and for its own run a built hyctl (build/bin/hyctl or
$HYCTL). Exit status: 0 rendered; 1 --require-data and a panel had no data;
2 a missing tool or file, or Prometheus / the run failed.
"""

import argparse
import datetime
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Grafana's grid: 24 columns; a height unit is 30 px plus an 8 px margin.
GRID_COLUMNS = 24
CELL_HEIGHT = 30
CELL_MARGIN = 8
HEADER_PX = 64
FOOTER_PX = 30

# Grafana's dark theme and its classic palette.
BG = "#111217"
PANEL_BG = "#181b1f"
PANEL_BORDER = "#2c3235"
TEXT = "#ccccdc"
TEXT_DIM = "#8e8e8e"
GRID = "#2a2d33"
PALETTE = ["#73BF69", "#F2CC0C", "#8AB8FF", "#FF780A", "#F2495C", "#5794F2",
           "#B877D9", "#705DA0", "#37872D", "#FADE2A", "#447EBC", "#C15C17",
           "#890F02", "#0A437C", "#6D1F62", "#584477", "#B7DBAB", "#F4D598",
           "#70DBED", "#F9BA8F", "#F29191", "#82B5D8", "#E5A8E2", "#AEA2E0"]
THRESHOLD_COLORS = {"green": "#73BF69", "red": "#F2495C", "yellow": "#FADE2A",
                    "orange": "#FF9830", "blue": "#5794F2",
                    "purple": "#B877D9"}


class Failure(Exception):
    """A problem the user must fix; printed without a traceback, exit 2."""


# ---------------------------------------------------------------- variables

def substitute_variables(text, values):
    """Grafana's variable forms, as tests/metrics/promql.cc's
    SubstituteVariables substitutes them: ${name}, ${name:format} (format
    dropped), [[name]] and $name; an unknown variable is an error."""
    out = []
    i = 0
    while i < len(text):
        if text.startswith("${", i):
            end = text.find("}", i)
            if end < 0:
                raise Failure("unterminated ${ in " + text)
            name = text[i + 2:end].split(":", 1)[0]
            end += 1
        elif text.startswith("[[", i):
            end = text.find("]]", i)
            if end < 0:
                raise Failure("unterminated [[ in " + text)
            name = text[i + 2:end]
            end += 2
        elif text[i] == "$":
            end = i + 1
            while end < len(text) and (text[end].isalnum() or text[end] == "_"):
                end += 1
            name = text[i + 1:end]
        else:
            out.append(text[i])
            i += 1
            continue
        if name not in values:
            raise Failure('no value for Grafana variable "%s" in: %s'
                          % (name, text))
        out.append(values[name])
        i = end
    return "".join(out)


# Grafana's interval rounding (kbn.roundInterval), in milliseconds.
_ROUND_STEPS = [
    (15, 10), (35, 20), (75, 50), (150, 100), (350, 200), (750, 500),
    (1500, 1000), (3500, 2000), (7500, 5000), (12500, 10000),
    (17500, 15000), (25000, 20000), (45000, 30000), (90000, 60000),
    (210000, 120000), (450000, 300000), (750000, 600000),
    (1050000, 900000), (1500000, 1200000), (2700000, 1800000),
    (5400000, 3600000), (9000000, 7200000), (16200000, 10800000),
    (32400000, 21600000), (86400000, 43200000)]


def round_interval(ms):
    for limit, value in _ROUND_STEPS:
        if ms < limit:
            return value
    return 86400000


def grafana_intervals(range_s, scrape_s, max_points):
    """$__interval and $__rate_interval as Grafana's Prometheus data source
    computes them with the data source's scrape interval set to scrape_s:
    interval = round(range / max data points), at least the scrape
    interval; rate interval = max(interval + scrape, 4 * scrape)."""
    interval_ms = max(round_interval(range_s * 1000.0 / max_points),
                      int(scrape_s * 1000))
    interval_s = max(1, int(math.ceil(interval_ms / 1000.0)))
    rate_s = max(interval_s + scrape_s, 4 * scrape_s)
    return interval_s, int(math.ceil(rate_s))


def parse_duration(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)?", text.strip())
    if not m:
        raise Failure("not a duration: %r (e.g. 1s, 500ms, 1m)" % text)
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]
    return float(m.group(1)) * scale


# ---------------------------------------------------------------- Prometheus

class Prometheus:
    def __init__(self, url):
        self.url = url.rstrip("/")

    def get(self, path, params=None, timeout=30):
        url = self.url + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=timeout) as r:
                return json.loads(r.read().decode())
        except urllib.error.HTTPError as e:
            body = e.read().decode(errors="replace")
            try:
                return json.loads(body)
            except ValueError:
                raise Failure("Prometheus %s: HTTP %d: %s"
                              % (url, e.code, body[:300]))
        except (urllib.error.URLError, OSError) as e:
            raise Failure("Prometheus at %s does not answer (%s)"
                          % (self.url, e))

    def query(self, expr, at=None):
        params = {"query": expr}
        if at is not None:
            params["time"] = "%.3f" % at
        return self.get("/api/v1/query", params)

    def query_range(self, expr, start, end, step):
        return self.get("/api/v1/query_range",
                        {"query": expr, "start": "%.3f" % start,
                         "end": "%.3f" % end, "step": "%g" % step})

    def ready(self):
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False


def listening_port(pid):
    """The TCP port process pid listens on, from /proc (0 while none)."""
    inodes = set()
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
        for table in ("tcp", "tcp6"):
            with open("/proc/%d/net/%s" % (pid, table)) as f:
                next(f)
                for line in f:
                    cols = line.split()
                    if cols[3] == "0A" and cols[9] in inodes:  # LISTEN
                        return int(cols[1].rsplit(":", 1)[1], 16)
    except OSError:
        return 0
    return 0


def start_prometheus(binary, config_text, workdir, log):
    """Starts Prometheus on 127.0.0.1, a free port, its TSDB in workdir;
    returns (process, Prometheus) once /-/ready answers."""
    config = os.path.join(workdir, "prometheus.yml")
    with open(config, "w") as f:
        f.write(config_text)
    check = subprocess.run([binary.replace("prometheus", "promtool"),
                            "check", "config", config],
                           capture_output=True, text=True) \
        if shutil.which(binary.replace("prometheus", "promtool")) else None
    if check is not None and check.returncode != 0:
        raise Failure("promtool check config %s:\n%s%s"
                      % (config, check.stdout, check.stderr))
    logf = open(log, "w")
    proc = subprocess.Popen(
        [binary, "--config.file=" + config,
         "--storage.tsdb.path=" + os.path.join(workdir, "tsdb"),
         "--web.listen-address=127.0.0.1:0"],
        stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            break
        port = listening_port(proc.pid)
        if port and Prometheus("http://127.0.0.1:%d" % port).ready():
            return proc, Prometheus("http://127.0.0.1:%d" % port)
        time.sleep(0.2)
    stop(proc)
    with open(log) as f:
        tail = f.read()[-3000:]
    raise Failure("prometheus did not start (log %s):\n%s" % (log, tail))


def stop(proc, sig=signal.SIGTERM, wait=30):
    """Stops a process this script started, and its process group."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, sig)
    except OSError:
        pass
    try:
        proc.wait(wait)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()


def prometheus_config(run_root, scrape):
    """metrics/prometheus.yml with RUN_ROOT and its 5 s intervals filled in,
    as tests/metrics/train_scrape_test.cc fills them."""
    path = os.path.join(REPO, "metrics", "prometheus.yml")
    with open(path) as f:
        text = f.read()
    if "RUN_ROOT/prometheus-targets.json" not in text:
        raise Failure("%s no longer names RUN_ROOT/prometheus-targets.json"
                      % path)
    return text.replace("RUN_ROOT", os.path.abspath(run_root)) \
               .replace("5s", scrape)


def require_targets(run_root):
    targets = os.path.join(run_root, "prometheus-targets.json")
    if not os.path.isfile(targets):
        raise Failure(
            "%s does not exist: %s is not the root of a run with metrics "
            "(`hyctl train --store %s --metrics-port 0` writes it when its "
            "ranks start)" % (targets, run_root, run_root))
    with open(targets) as f:
        try:
            groups = json.load(f)
        except ValueError as e:
            raise Failure("%s is not JSON: %s" % (targets, e))
    return [t for g in groups for t in g.get("targets", [])]


# ---------------------------------------------------------------- the run

def find_hyctl(arg):
    path = arg or os.environ.get("HYCTL") or os.path.join(
        REPO, "build", "bin", "hyctl")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise Failure("hyctl not found at %s: build it (cmake --build build) "
                      "or pass --hyctl / set HYCTL" % path)
    return path


def descendants(pid):
    """Process ids under pid (from /proc), children first."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for c in sorted(children.get(todo.pop(0), [])):
            out.append(c)
            todo.append(c)
    return out


def start_run(args, workdir, say):
    hyctl = find_hyctl(args.hyctl)
    run_root = os.path.join(workdir, "run")
    data = []
    for name, count, seed in (("train", 20000, 1), ("val", 200, 2)):
        path = os.path.join(workdir, name + ".jsonl")
        subprocess.run([hyctl, "data", "gen-arith", path, "--count",
                        str(count), "--seed", str(seed), "--ops", "+",
                        "--max-digits", "1"], check=True,
                       stdout=subprocess.DEVNULL)
        data.append(path)
    cmd = [hyctl, "train", "--config", args.config, "--data", data[0],
           "--val-data", data[1], "--store", run_root, "--metrics-port", "0",
           "--nproc", str(args.nproc), "--iterations", str(args.iterations),
           "--set", "checkpoint.save_every=%d" % args.save_every]
    if args.kill_worker_at is not None:
        cmd += ["--max-restarts", "1"]
    for s in args.set or []:
        cmd += ["--set", s]
    log = os.path.join(workdir, "train.log")
    say("training: " + " ".join(cmd) + "  (log " + log + ")")
    proc = subprocess.Popen(cmd, stdout=open(log, "w"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 120
    targets = os.path.join(run_root, "prometheus-targets.json")
    while not os.path.isfile(targets):
        if proc.poll() is not None or time.time() > deadline:
            stop(proc)
            raise Failure("hyctl train wrote no %s (log %s):\n%s"
                          % (targets, log, open(log).read()[-3000:]))
        time.sleep(0.2)
    return proc, run_root, log


def committed(prom, variables):
    """Whether the run has committed a checkpoint (as last scraped)."""
    try:
        r = prom.query(substitute_variables(
            'max(hy_checkpoint_last_committed_step{job=~"$job", '
            'instance=~"$instance", rank=~"$rank"}) >= 0', variables))
    except Failure:  # Prometheus not answering yet: not yet.
        return False
    return bool(r.get("data", {}).get("result"))


def wait_run(proc, args, log, say, prom, variables):
    """Waits for the run to end, at most --minutes; kills one worker at
    --kill-worker-at seconds, or later once a checkpoint is committed (the
    restart then has a version to recover): hyctl train restarts the
    workers, which recover it (the Recovery row)."""
    start = time.time()
    deadline = start + args.minutes * 60
    killed = args.kill_worker_at is None
    waiting_said = False
    while proc.poll() is None:
        now = time.time()
        if not killed and now - start >= args.kill_worker_at and \
                not committed(prom, variables):
            if not waiting_said:
                say("%.0f s: no checkpoint committed yet; killing a worker "
                    "once one is" % (now - start))
                waiting_said = True
        elif not killed and now - start >= args.kill_worker_at:
            # The last worker (highest rank): a child of hyctl train.
            direct = [p for p in descendants(proc.pid)
                      if _ppid(p) == proc.pid]
            if direct:
                victim = direct[-1]
                say("killing worker pid %d (kill -9) at %.0f s"
                    % (victim, now - start))
                try:
                    os.kill(victim, signal.SIGKILL)
                except OSError:
                    pass
            killed = True
        if now > deadline:
            say("stopping the run after %.1f minutes (--minutes)"
                % args.minutes)
            stop(proc, signal.SIGINT, wait=60)
            break
        time.sleep(0.5)
    rc = proc.wait()
    if rc not in (0, -signal.SIGINT, 130):
        say("hyctl train exited %d; its log's end:\n%s"
            % (rc, open(log).read()[-2000:]))
    return rc


def _ppid(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
        return int(stat[stat.rindex(")") + 2:].split()[1])
    except (OSError, ValueError):
        return -1


# ---------------------------------------------------------------- queries

def all_panels(dashboard):
    """Top-level panels in order, and the panels of collapsed rows."""
    out = []
    for p in dashboard.get("panels", []):
        out.append(p)
        for n in p.get("panels", []) or []:
            out.append(n)
    return out


def last_full_scrape(prom, variables, start, end):
    """The last time (within start..end) at which as many hy targets had a
    fresh hy_build_info sample as at any time in the range, or None when
    none had: a run that has ended leaves its series stale, so the range
    (and an instant query) must end before its ranks stopped."""
    expr = substitute_variables(
        'count(hy_build_info{job=~"$job", instance=~"$instance", '
        'rank=~"$rank"})', variables)
    # A fine step (at most 10,000 points, under Prometheus's 11,000): the
    # time found is within a quarter second of the last full scrape.
    r = prom.query_range(expr, start, end, max(0.25, (end - start) / 1e4))
    points = [(float(t), float(v))
              for s in r.get("data", {}).get("result", [])
              for t, v in s.get("values", [])]
    if not points:
        return None
    most = max(v for _, v in points)
    return max(t for t, v in points if v == most)


def evaluate(dashboard, prom, variables, start, end, step):
    """Every panel's targets against Prometheus; returns a list of panel
    results {panel, targets: [{expr, legend, series: [(label, ts, vs)],
    error}]}."""
    results = []
    for panel in all_panels(dashboard):
        if panel.get("type") == "row":
            results.append({"panel": panel, "targets": []})
            continue
        targets = []
        for t in panel.get("targets", []):
            if t.get("hide"):
                continue
            expr = substitute_variables(t["expr"], variables)
            instant = t.get("instant") and not t.get("range", False)
            r = prom.query(expr, end) if instant else \
                prom.query_range(expr, start, end, step)
            entry = {"expr": expr, "legendFormat": t.get("legendFormat", ""),
                     "instant": bool(instant), "series": [], "error": None}
            if r.get("status") != "success":
                entry["error"] = r.get("error", "query failed")
            else:
                for s in r["data"]["result"]:
                    label = legend(t.get("legendFormat", ""), s["metric"],
                                   expr)
                    pairs = s.get("values") or [s.get("value")]
                    ts = [float(p[0]) for p in pairs if p]
                    vs = [float(p[1]) for p in pairs if p]
                    entry["series"].append((label, ts, vs))
            targets.append(entry)
        results.append({"panel": panel, "targets": targets})
    return results


def legend(fmt, labels, expr):
    """Grafana's legend: legendFormat with {{label}} filled in; without one,
    the series' labels (or the expression when it has none)."""
    if fmt and fmt != "__auto":
        return re.sub(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}",
                      lambda m: labels.get(m.group(1), ""), fmt)
    name = labels.get("__name__", "")
    rest = ", ".join('%s="%s"' % (k, v) for k, v in sorted(labels.items())
                     if k != "__name__")
    if not name and not rest:
        return expr
    return name + ("{" + rest + "}" if rest else "")


def finite_points(series):
    return sum(1 for _, _, vs in series for v in vs if math.isfinite(v))


# ---------------------------------------------------------------- units

_SI = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
_SHORT = [(1e12, " Tri"), (1e9, " Bil"), (1e6, " Mil"), (1e3, " K")]
_BIN = [(2 ** 40, "Ti"), (2 ** 30, "Gi"), (2 ** 20, "Mi"), (2 ** 10, "Ki")]


def _num(v, decimals):
    if decimals is not None:
        return "%.*f" % (decimals, v)
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 100:
        return "%.0f" % v
    if a >= 10:
        return ("%.1f" % v).rstrip("0").rstrip(".")
    if a >= 1:
        return ("%.2f" % v).rstrip("0").rstrip(".")
    return ("%.3g" % v)


def _scaled(v, table, unit, decimals, sep=" "):
    for factor, prefix in table:
        if abs(v) >= factor:
            return _num(v / factor, decimals) + sep + prefix + unit
    return _num(v, decimals) + sep + unit


def format_value(v, unit, decimals=None):
    """A value in a Grafana unit, as Grafana prints it (close enough)."""
    if v is None or not math.isfinite(v):
        return "NaN" if v is not None and math.isnan(v) else "-"
    unit = unit or "short"
    if unit.startswith("suffix:"):
        return _num(v, decimals) + unit[len("suffix:"):]
    if unit == "none":
        return _num(v, decimals)
    if unit == "short":
        for factor, suffix in _SHORT:
            if abs(v) >= factor:
                return _num(v / factor, decimals) + suffix
        return _num(v, decimals)
    if unit == "percentunit":
        return _num(v * 100, decimals if decimals is None
                    else max(decimals - 2, 0)) + "%"
    if unit == "percent":
        return _num(v, decimals) + "%"
    if unit == "s":
        a = abs(v)
        if a == 0:
            return "0 s"
        if a < 1e-3:
            return _num(v * 1e6, decimals) + " µs"
        if a < 1:
            return _num(v * 1e3, decimals) + " ms"
        if a < 60:
            return _num(v, decimals) + " s"
        if a < 3600:
            return _num(v / 60, decimals) + " min"
        return _num(v / 3600, decimals) + " hour"
    if unit == "ms":
        return format_value(v / 1000.0, "s", decimals)
    if unit == "binBps":
        return _scaled(v, _BIN, "B/s", decimals)
    if unit in ("bytes", "decbytes"):
        return _scaled(v, _BIN if unit == "bytes" else _SI, "B", decimals)
    if unit == "Bps":
        return _scaled(v, _SI, "B/s", decimals)
    if unit == "ops":
        return _scaled(v, _SI, "ops/s", decimals)
    return _num(v, decimals) + " " + unit


# ---------------------------------------------------------------- drawing

def render(results, dashboard, out, width_px, header, footer,
           t_range):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch, Rectangle
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    dpi = 100
    panels = [r["panel"] for r in results]
    rows_h = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    height_px = HEADER_PX + rows_h * (CELL_HEIGHT + CELL_MARGIN) + FOOTER_PX
    fig = plt.figure(figsize=(width_px / dpi, height_px / dpi), dpi=dpi,
                     facecolor=BG)
    col_px = (width_px - 2 * CELL_MARGIN) / GRID_COLUMNS
    tz = datetime.datetime.now().astimezone().tzinfo
    fs = 8.5  # points at 100 dpi: about Grafana's 12 px

    def rect(px_x, px_y, px_w, px_h):
        """Pixel box from the top left to figure coordinates."""
        return [px_x / width_px, 1 - (px_y + px_h) / height_px,
                px_w / width_px, px_h / height_px]

    def text_px(px_x, px_y, s, **kw):
        fig.text(px_x / width_px, 1 - px_y / height_px, s, **kw)

    # Header: title, variables, time range (Grafana's top bar).
    text_px(CELL_MARGIN + 4, 20, dashboard.get("title", ""), color=TEXT,
            fontsize=13, va="center", weight="bold")
    text_px(CELL_MARGIN + 4, 46, header, color=TEXT_DIM, fontsize=fs,
            va="center")
    text_px(CELL_MARGIN + 4, height_px - FOOTER_PX / 2, footer,
            color=TEXT_DIM, fontsize=7.5, va="center")

    for r in results:
        p = r["panel"]
        g = p["gridPos"]
        x = CELL_MARGIN + g["x"] * col_px
        y = HEADER_PX + g["y"] * (CELL_HEIGHT + CELL_MARGIN)
        w = g["w"] * col_px - CELL_MARGIN
        h = g["h"] * CELL_HEIGHT + (g["h"] - 1) * CELL_MARGIN
        if p.get("type") == "row":
            text_px(x + 2, y + h / 2 + 2, ("▾ " if not p.get("collapsed")
                                           else "▸ ") + p.get("title", ""),
                    color=TEXT, fontsize=10.5, weight="bold", va="center")
            continue
        bg = fig.add_axes(rect(x, y, w, h))
        bg.set_axis_off()
        bg.add_patch(FancyBboxPatch((0.003, 0.005), 0.994, 0.99,
                                    boxstyle="round,pad=0,rounding_size=0.01",
                                    transform=bg.transAxes, facecolor=PANEL_BG,
                                    edgecolor=PANEL_BORDER, linewidth=0.8))
        text_px(x + 8, y + 14, p.get("title", ""), color=TEXT, fontsize=fs,
                va="center", weight="bold")
        defaults = p.get("fieldConfig", {}).get("defaults", {})
        unit = defaults.get("unit", "short")
        decimals = defaults.get("decimals")
        series = [(lbl, ts, vs) for t in r["targets"]
                  for (lbl, ts, vs) in t["series"]]
        body = (x + 8, y + 28, w - 16, h - 36)
        if not any(math.isfinite(v) for _, _, vs in series for v in vs):
            text_px(x + w / 2, y + h / 2 + 8, "No data", color=TEXT_DIM,
                    fontsize=11, ha="center", va="center")
            continue
        kind = p.get("type")
        if kind == "timeseries":
            # Legend at the bottom, list mode: entries in rows.
            # palette-classic: colours by series index within the panel.
            entries = [(lbl, PALETTE[i % len(PALETTE)])
                       for i, (lbl, _, _) in enumerate(series)]
            lines, line_w = [[]], 0
            for e in entries:
                ew = 22 + 6.2 * len(e[0]) + 10
                if lines[-1] and line_w + ew > body[2]:
                    lines.append([])
                    line_w = 0
                lines[-1].append((e, ew))
                line_w += ew
            legend_h = 16 * len(lines) + 4
            ax = fig.add_axes(rect(body[0] + 46, body[1],
                                   body[2] - 50, body[3] - legend_h - 18))
            ax.set_facecolor(PANEL_BG)
            for (lbl, ts, vs), (_, color) in zip(series, entries):
                dts = [datetime.datetime.fromtimestamp(t, tz) for t in ts]
                vals = [v if math.isfinite(v) else float("nan") for v in vs]
                ax.plot(dts, vals, color=color, linewidth=1.1)
                ax.fill_between(dts, vals, alpha=0.10, color=color,
                                linewidth=0)
                # An isolated point (a gap each side) would not show as a
                # line: mark it, as Grafana does.
                iso = [i for i, v in enumerate(vals) if math.isfinite(v)
                       and (i == 0 or not math.isfinite(vals[i - 1]))
                       and (i + 1 == len(vals)
                            or not math.isfinite(vals[i + 1]))]
                if iso:
                    ax.plot([dts[i] for i in iso], [vals[i] for i in iso],
                            "o", color=color, markersize=2.2)
            ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S",
                                                              tz=tz))
            ax.xaxis.set_major_locator(MaxNLocator(
                nbins=max(2, int(w / 110))))
            ax.yaxis.set_major_locator(MaxNLocator(nbins=5))
            ax.yaxis.set_major_formatter(FuncFormatter(
                lambda v, _, unit=unit: format_value(v, unit)))
            ax.tick_params(colors=TEXT_DIM, labelsize=7, length=0, pad=3)
            for s in ax.spines.values():
                s.set_visible(False)
            ax.grid(True, color=GRID, linewidth=0.6)
            ax.set_xlim(datetime.datetime.fromtimestamp(t_range[0], tz),
                        datetime.datetime.fromtimestamp(t_range[1], tz))
            finite = [v for _, _, vs in series for v in vs
                      if math.isfinite(v)]
            lo, hi = min(finite), max(finite)
            if lo == hi:
                pad = abs(lo) * 0.1 or 1
                ax.set_ylim(lo - pad, hi + pad)
            ly = body[1] + body[3] - legend_h + 8
            for line in lines:
                lx = body[0] + 2
                for (lbl, color), ew in line:
                    fig.add_artist(Rectangle(
                        ((lx) / width_px, 1 - (ly + 1.5) / height_px),
                        14 / width_px, 3 / height_px, color=color,
                        transform=fig.transFigure))
                    text_px(lx + 19, ly, lbl, color=TEXT, fontsize=7.5,
                            va="center")
                    lx += ew
                ly += 16
        elif kind == "stat":
            values = [(lbl, last_not_null(vs)) for lbl, _, vs in series]
            steps = defaults.get("thresholds", {}).get("steps", [])
            n = len(values)
            texts = [format_value(v, unit, decimals) for _, v in values]
            longest = max(len(lbl) for lbl, _ in values) if n > 1 else 0

            def sizes(cols):
                rows = int(math.ceil(n / float(cols)))
                cw, ch = body[2] / cols, body[3] / rows
                big = min(ch * 0.45, cw / max(3, max(map(len, texts))) * 1.6,
                          48)
                fit = (cw - 6) / (max(longest, 1) * 0.6 * dpi / 72)
                return min(big * 0.35, fit, 10), big, cols, rows, cw, ch

            # orientation auto: side by side, in more rows when the names
            # would not fit (Grafana wraps its stat grid the same way).
            choices = [sizes(c) for c in range(n, 0, -1)]
            good = [c for c in choices if c[0] >= 7.5 or n == 1]
            _, big, cols, rows, cw, ch = (good[0] if good else
                                          max(choices, key=lambda c: c[0]))
            for i, (lbl, v) in enumerate(values):
                cx = body[0] + (i % cols) * cw + cw / 2
                cy = body[1] + (i // cols) * ch + ch / 2
                color = threshold_color(steps, v)
                if n > 1:
                    # The name, as large as fits the cell (up to 10 pt).
                    fit = (cw - 6) / (max(len(lbl), 1) * 0.6 * dpi / 72)
                    text_px(cx, cy - big * 0.75, lbl, color=TEXT,
                            fontsize=max(5.5, min(10, big * 0.35, fit)),
                            ha="center", va="center")
                text_px(cx, cy + big * 0.2 + (6 if n > 1 else 0),
                        format_value(v, unit, decimals), color=color,
                        fontsize=big * 0.72, ha="center", va="center",
                        weight="bold")
        elif kind == "bargauge":
            values = [(lbl, last_not_null(vs)) for lbl, _, vs in series]
            steps = defaults.get("thresholds", {}).get("steps", [])
            finite = [v for _, v in values if v is not None
                      and math.isfinite(v)]
            vmax = defaults.get("max", max(finite + [0]) or 1)
            vmin = defaults.get("min", min(finite + [0]))
            n = len(values)
            bh = min(body[3] / max(n, 1), 48)
            for i, (lbl, v) in enumerate(values):
                by = body[1] + i * bh
                text_px(body[0], by + 8, lbl, color=TEXT, fontsize=7.5,
                        va="center")
                bar_x, bar_w = body[0], body[2] - 90
                frac = 0 if v is None or not math.isfinite(v) or \
                    vmax == vmin else (v - vmin) / (vmax - vmin)
                ax = fig.add_axes(rect(bar_x, by + 16, bar_w,
                                       max(bh - 22, 6)))
                ax.set_axis_off()
                ax.set_xlim(0, 1)
                ax.set_ylim(0, 1)
                ax.add_patch(Rectangle((0, 0), 1, 1, color="#22252b"))
                color = threshold_color(steps, v)
                grad = [[i / 50.0 for i in range(51)]]
                from matplotlib.colors import LinearSegmentedColormap
                cmap = LinearSegmentedColormap.from_list(
                    "g", [PANEL_BG, color])
                if frac > 0:
                    ax.imshow(grad, extent=(0, frac, 0, 1), aspect="auto",
                              cmap=cmap, vmin=0, vmax=1)
                    ax.set_xlim(0, 1)
                text_px(bar_x + bar_w + 6, by + 16 + max(bh - 22, 6) / 2,
                        format_value(v, unit, decimals), color=color,
                        fontsize=10, va="center", weight="bold")
        else:
            text_px(x + w / 2, y + h / 2, "(panel type %s not drawn)" % kind,
                    color=TEXT_DIM, fontsize=9, ha="center", va="center")
    fig.savefig(out, dpi=dpi, facecolor=BG)
    plt.close(fig)


def last_not_null(vs):
    for v in reversed(vs):
        if v is not None and math.isfinite(v):
            return v
    return vs[-1] if vs else None


def finite_or_none(v):
    return v if v is not None and math.isfinite(v) else None


def threshold_color(steps, v):
    color = "green"
    for s in steps:
        if s.get("value") is None or (v is not None and math.isfinite(v)
                                      and v >= s["value"]):
            color = s.get("color", color)
    return THRESHOLD_COLORS.get(color, color)


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("--run-root", help="attach to this run (its "
                    "prometheus-targets.json): scrape it for --minutes with "
                    "a Prometheus started here; with --prometheus, only "
                    "select its targets (the $instance variable)")
    ap.add_argument("--prometheus", metavar="URL",
                    help="query this running Prometheus instead of starting "
                    "one (it must already scrape hy, job label as in "
                    "metrics/prometheus.yml)")
    ap.add_argument("--out", default=os.path.join(REPO, "docs",
                                                  "dashboard.png"),
                    help="the PNG (default docs/dashboard.png)")
    ap.add_argument("--minutes", type=float, default=None,
                    help="own run: train at most this long (default 3); "
                    "--run-root: scrape this long (default 2); --prometheus: "
                    "the time range drawn, ending now (default 15)")
    ap.add_argument("--json", action="store_true",
                    help="print a JSON summary (panels, series counts, each "
                    "series' last value, empty panels) on stdout instead of "
                    "text")
    ap.add_argument("--require-data", action="store_true",
                    help="exit 1 if a panel has no finite value")
    ap.add_argument("--dashboard", default=os.path.join(
        REPO, "metrics", "grafana", "hy-overview.json"))
    ap.add_argument("--scrape-interval", default="1s",
                    help="scrape and SD refresh interval put in the "
                    "temporary metrics/prometheus.yml (default 1s), and the "
                    "data source's scrape interval for $__rate_interval")
    ap.add_argument("--var", action="append", metavar="NAME=VALUE",
                    help="a dashboard variable's value (default: All, "
                    "'.*', for job, instance, rank); repeatable")
    ap.add_argument("--width", type=int, default=1600,
                    help="image width in pixels (default 1600)")
    ap.add_argument("--prometheus-bin", default="prometheus")
    run = ap.add_argument_group("the run this script starts (no --run-root, "
                                "no --prometheus)")
    run.add_argument("--hyctl", help="default build/bin/hyctl or $HYCTL")
    run.add_argument("--config", default=os.path.join(REPO, "configs",
                                                      "demo.yaml"))
    run.add_argument("--nproc", type=int, default=2)
    run.add_argument("--iterations", type=int, default=200)
    run.add_argument("--save-every", type=int, default=2,
                     help="checkpoint.save_every (default 2: the checkpoint "
                     "panels get a point every second iteration)")
    run.add_argument("--kill-worker-at", type=float, metavar="SECONDS",
                     help="kill -9 the last worker this many seconds into "
                     "the run, or later once a checkpoint is committed "
                     "(with --max-restarts 1): the Recovery row then has a "
                     "recovery to show")
    run.add_argument("--set", action="append", metavar="KEY=VALUE",
                     help="more hyctl train --set overrides")
    run.add_argument("--keep", metavar="DIR",
                     help="keep the run, Prometheus's data and logs in DIR "
                     "(default: a temporary directory, removed)")
    args = ap.parse_args()

    say = (lambda m: print("render-dashboard: " + m, file=sys.stderr,
                           flush=True))
    t0 = time.time()
    procs = []
    workdir = None
    try:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise Failure("matplotlib is not installed for %s: pip install "
                          "matplotlib (or Debian python3-matplotlib)"
                          % sys.executable)
        with open(args.dashboard) as f:
            dashboard = json.load(f)
        scrape_s = parse_duration(args.scrape_interval)
        mode = ("prometheus" if args.prometheus else
                "run-root" if args.run_root else "own-run")
        minutes = args.minutes if args.minutes is not None else \
            {"own-run": 3, "run-root": 2, "prometheus": 15}[mode]
        args.minutes = minutes
        prom_bin = None
        if mode != "prometheus":
            prom_bin = shutil.which(args.prometheus_bin)
            if not prom_bin:
                raise Failure(
                    "%s not found on PATH: install Debian's prometheus "
                    "(apt-get install prometheus; scripts/install-deps.sh "
                    "does), or pass --prometheus URL of a running one"
                    % args.prometheus_bin)
        if args.run_root:
            require_targets(args.run_root)
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            workdir = os.path.abspath(args.keep)
        else:
            workdir = tempfile.mkdtemp(prefix="render-dashboard-")

        variables = {"job": ".*", "instance": ".*", "rank": ".*",
                     "run": ".*", "datasource": "prometheus"}
        run_root = args.run_root
        if mode == "prometheus" and run_root:
            # As Grafana formats a multi-value variable for a Prometheus
            # regex: (a|b), each value's regex characters escaped, the
            # backslashes doubled inside the PromQL string.
            variables["instance"] = "(" + "|".join(
                re.sub(r"([\\.^$*+?()\[\]{}|])", r"\\\\\1", t)
                for t in require_targets(run_root)) + ")"
        for kv in args.var or []:
            name, _, value = kv.partition("=")
            variables[name] = value

        train = None
        if mode == "own-run":
            train, run_root, train_log = start_run(args, workdir, say)
            procs.append(train)
        if mode in ("own-run", "run-root"):
            config = prometheus_config(run_root, args.scrape_interval)
            pproc, prom = start_prometheus(
                prom_bin, config, workdir,
                os.path.join(workdir, "prometheus.log"))
            procs.append(pproc)
            say("Prometheus %s (metrics/prometheus.yml, run root %s, "
                "scrape %s)" % (prom.url, os.path.abspath(run_root),
                                args.scrape_interval))
        else:
            prom = Prometheus(args.prometheus)
            if not prom.ready():
                raise Failure("Prometheus at %s is not ready (/-/ready)"
                              % prom.url)
        t_start = time.time()
        if mode == "own-run":
            wait_run(train, args, train_log, say, prom, variables)
            time.sleep(2 * scrape_s)
        elif mode == "run-root":
            say("scraping %s for %.1f minutes" % (run_root, minutes))
            time.sleep(minutes * 60)
        now = time.time()
        if mode == "prometheus":
            t_start = now - minutes * 60
        render_t0 = time.time()
        probe = last_full_scrape(prom, variables, t_start - 5, now)
        if probe is None:
            say("no hy_build_info sample in the range: no hy target was "
                "scraped (is the run going? are its targets up?)")
        end = min(now, probe) if probe else now
        range_s = max(end - t_start, 60.0)
        # Grafana asks for about as many points as the panel is wide.
        interval_s, rate_s = grafana_intervals(
            range_s, scrape_s, args.width / 2)
        # Steps back from the last full scrape, so that the last point is
        # the run's last value (a later one could meet stale series).
        start = end - math.ceil(range_s / interval_s) * interval_s
        variables.update({
            "__interval": "%ds" % interval_s,
            "__interval_ms": str(interval_s * 1000),
            "__rate_interval": "%ds" % rate_s,
            "__range": "%ds" % int(end - start),
            "__range_s": str(int(end - start)),
            "__range_ms": str(int(end - start) * 1000),
        })
        results = evaluate(dashboard, prom, variables, start, end,
                           interval_s)
        up = prom.query(substitute_variables(
            'count(up{job=~"$job", instance=~"$instance", '
            'rank=~"$rank"})', variables), end)
        n_targets = int(float(up["data"]["result"][0]["value"][1])) \
            if up.get("data", {}).get("result") else 0

        def fmt_t(t):
            return datetime.datetime.fromtimestamp(t).astimezone() \
                .strftime("%Y-%m-%d %H:%M:%S %Z")
        shown = ", ".join("%s: %s" % (k.capitalize(),
                                      "All" if variables[k] == ".*"
                                      else variables[k])
                          for k in ("job", "instance", "rank"))
        header = ("Data source: Prometheus   %s   |   %s to %s (%d min %02d "
                  "s), step %ds, $__rate_interval %ds"
                  % (shown, fmt_t(start), fmt_t(end).split(" ", 1)[1],
                     (end - start) // 60, (end - start) % 60, interval_s,
                     rate_s))
        footer = ("Rendered by scripts/render-dashboard.py (matplotlib) from "
                  "%s: each panel's own PromQL against a real Prometheus "
                  "(metrics/prometheus.yml) scraping %s; not a Grafana "
                  "screenshot." % (os.path.relpath(args.dashboard, REPO)
                                   if args.dashboard.startswith(REPO)
                                   else args.dashboard,
                                   "%d hy target%s" % (
                                       n_targets, "" if n_targets == 1
                                       else "s")))
        os.makedirs(os.path.dirname(os.path.abspath(args.out)) or ".",
                    exist_ok=True)
        render(results, dashboard, args.out, args.width, header, footer,
               (start, end))
        render_s = time.time() - render_t0

        summary = {"dashboard": args.dashboard, "prometheus": prom.url,
                   "run_root": os.path.abspath(run_root) if run_root
                   else None,
                   "out": os.path.abspath(args.out),
                   "range": {"start": start, "end": end,
                             "step_s": interval_s,
                             "rate_interval_s": rate_s},
                   "targets_up": n_targets,
                   "seconds": {"total": round(time.time() - t0, 1),
                               "query_and_render": round(render_s, 1)},
                   "panels": [], "empty_panels": []}
        for r in results:
            p = r["panel"]
            if p.get("type") == "row":
                continue
            series = [s for t in r["targets"] for s in t["series"]]
            finite = sum(finite_points(t["series"]) for t in r["targets"])
            errors = [t["error"] for t in r["targets"] if t["error"]]
            entry = {"id": p.get("id"), "title": p.get("title"),
                     "type": p.get("type"), "series": len(series),
                     "finite_points": finite,
                     "targets": [{"expr": t["expr"],
                                  "series": len(t["series"]),
                                  "finite_points": finite_points(
                                      t["series"]),
                                  "error": t["error"],
                                  # What a stat or bar gauge shows: each
                                  # series' last finite value (null: none).
                                  "last": [{"legend": label,
                                            "value": finite_or_none(
                                                last_not_null(vs))}
                                           for label, _, vs in t["series"]]}
                                 for t in r["targets"]]}
            summary["panels"].append(entry)
            if finite == 0:
                why = ("query error: " + "; ".join(errors) if errors else
                       "no series" if not series else
                       "only NaN (%d series)" % len(series))
                summary["empty_panels"].append(
                    {"id": p.get("id"), "title": p.get("title"),
                     "why": why})
        if args.json:
            print(json.dumps(summary, indent=2))
        report = sys.stderr if args.json else sys.stdout
        print("%s: %d panels, %d with data, from %d target(s); queries and "
              "drawing took %.1f s (%.1f s in all)"
              % (args.out, len(summary["panels"]),
                 len(summary["panels"]) - len(summary["empty_panels"]),
                 n_targets, render_s, time.time() - t0), file=report)
        for e in summary["empty_panels"]:
            print("no data: panel %s \"%s\" (%s)"
                  % (e["id"], e["title"], e["why"]), file=report)
        return 1 if args.require_data and summary["empty_panels"] else 0
    except Failure as e:
        print("render-dashboard: " + str(e), file=sys.stderr)
        return 2
    finally:
        for p in reversed(procs):
            stop(p, signal.SIGINT if p is procs[0] and len(procs) > 1
                 else signal.SIGTERM)
        if workdir and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
