// Conveyor's dashboard: renders /dashboard/events (one JSON snapshot a second).
// Plain DOM and SVG, no dependencies; every text from the server goes in as textContent.
"use strict";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  for (const child of children) node.append(child);
  return node;
}

function num(value, digits) {
  if (value === null || value === undefined) return "–";
  if (Math.abs(value) >= 1000) return Math.round(value).toLocaleString("en-US");
  return value.toFixed(digits === undefined ? 1 : digits);
}

function ms(value) {
  if (value === null || value === undefined) return "–";
  return value < 10 ? value.toFixed(2) : value < 100 ? value.toFixed(1) : Math.round(value).toString();
}

function tile(label, value, unit, field, bad) {
  const name = el("div", { class: "label" }, label);
  if (unit) name.append(" ", el("span", { class: "unit" }, unit));
  const v = el("div", { class: "value", "data-field": field, title: value }, value);
  return el("div", { class: "tile" + (bad ? " bad" : "") }, name, v);
}

function batchBars(sizes) {
  const total = sizes.reduce((sum, b) => sum + b.count, 0);
  if (!total) return el("div", { class: "muted" }, "no batches yet");
  const max = Math.max(...sizes.map((b) => b.count));
  const bars = el("div", { class: "bars" });
  const labels = el("div", { class: "bar-labels" });
  for (const b of sizes.slice(-16)) {
    const bar = el("div", { title: `size ${b.size}: ${b.count} executions` });
    bar.style.height = Math.max(2, (100 * b.count) / max) + "%";
    bars.append(bar);
    labels.append(el("span", {}, String(b.size)));
  }
  return el("div", {}, bars, labels);
}

function modelCard(m) {
  const card = el("section", { class: "card model", "data-model": m.name, "data-version": m.version });
  const head = el("div", { class: "model-head" },
    el("h2", {}, m.name + (m.version ? ` v${m.version}` : "")),
    el("span", { class: "badge " + m.state, "data-field": "state" }, m.state));
  if (m.backend) {
    head.append(el("div", { class: "sub" },
      `${m.backend} · ${m.instance_count} ${m.instance_kind} instance${m.instance_count === 1 ? "" : "s"}`));
  }
  card.append(head);
  if (m.reason) card.append(el("p", { class: "reason", "data-field": "reason" }, m.reason));
  if (m.success === undefined) return card;

  const lat = m.latency_ms || {};
  card.append(el("div", { class: "tiles" },
    tile("req/s", num(m.requests_per_s), "", "requests_per_s"),
    tile("fail/s", num(m.failures_per_s), "", "failures_per_s", m.failures_per_s > 0),
    tile("queued", String(m.pending), "", "pending"),
    tile("batch", num(m.avg_batch_size, 2), "avg", "avg_batch_size"),
    tile("p50", ms(lat.p50), "ms", "p50"),
    tile("p90", ms(lat.p90), "ms", "p90"),
    tile("p99", ms(lat.p99), "ms", "p99"),
    tile("wait", ms(m.avg_queue_ms), "ms", "avg_queue_ms")));

  const used = m.utilization === null ? 0 : m.utilization;
  const meter = el("div", { class: "meter" }, el("div", {}));
  meter.firstChild.style.width = (100 * used).toFixed(1) + "%";
  card.append(el("div", { class: "section-title" },
    "instance utilization ", el("b", { "data-field": "utilization" },
      m.utilization === null ? "–" : Math.round(100 * used) + "%")), meter);

  card.append(el("div", { class: "section-title" }, "batch sizes"), batchBars(m.batch_sizes));

  if (m.workers && m.workers.length) {
    const workers = el("div", { class: "workers" });
    m.workers.forEach((w, i) => workers.append(el("span", { class: "worker" + (w.alive ? "" : " dead") },
      `#${i} ${w.alive ? "pid " + w.pid : "down"}${w.restarts ? ` · ${w.restarts} restart${w.restarts === 1 ? "" : "s"}` : ""}`)));
    card.append(el("div", { class: "section-title" }, "worker processes"), workers);
  }
  if (m.recent_errors && m.recent_errors.length) {
    const list = el("ul", { class: "errors" });
    for (const e of m.recent_errors) {
      list.append(el("li", {}, el("time", {}, new Date(e.at * 1000).toLocaleTimeString()), e.message));
    }
    card.append(el("div", { class: "section-title" }, "recent errors"), list);
  }
  card.append(el("div", { class: "totals" },
    "total: ", el("span", { "data-field": "success" }, String(m.success)), " ok · ",
    el("span", { "data-field": "fail" }, String(m.fail)), " failed · ",
    el("span", { "data-field": "execution_count" }, String(m.execution_count)), " executions · ",
    `avg compute ${ms(m.avg_compute_ms)} ms`));
  return card;
}

function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

function niceMax(value) {
  if (!(value > 0)) return 1;
  const step = Math.pow(10, Math.floor(Math.log10(value)));
  for (const m of [1, 2, 4, 8, 10]) if (m * step >= value) return m * step;
  return 10 * step;
}

function drawChart(history) {
  const chart = $("chart");
  const width = chart.clientWidth || 600;
  const height = chart.clientHeight || 180;
  const pad = { l: 44, r: 48, t: 8, b: 20 };
  chart.setAttribute("viewBox", `0 0 ${width} ${height}`);
  chart.replaceChildren();
  const now = history.length ? history[history.length - 1].t : Date.now() / 1000;
  // Up to 5 minutes, but never less than one: a young server's line is not a speck at the edge.
  const span = Math.min(300, Math.max(60, history.length ? now - history[0].t : 0));
  const ago = (s) => (s >= 60 ? `-${+(s / 60).toFixed(1)} min` : `-${Math.round(s)} s`);
  $("chart-title").textContent = `Last ${span >= 90 ? Math.round(span / 60) + " minutes" : Math.round(span) + " seconds"}`;
  const x = (t) => pad.l + ((t - (now - span)) / span) * (width - pad.l - pad.r);
  const rateMax = niceMax(Math.max(0, ...history.map((p) => p.requests_per_s + p.failures_per_s)));
  const latMax = niceMax(Math.max(0, ...history.map((p) => p.p99_ms || 0)));
  const yRate = (v) => height - pad.b - (v / rateMax) * (height - pad.t - pad.b);
  const yLat = (v) => height - pad.b - (v / latMax) * (height - pad.t - pad.b);
  for (let i = 0; i <= 4; i++) {
    const y = pad.t + (i * (height - pad.t - pad.b)) / 4;
    chart.append(svg("line", { class: "grid", x1: pad.l, x2: width - pad.r, y1: y, y2: y }));
    const left = svg("text", { x: pad.l - 6, y: y + 4, "text-anchor": "end" });
    left.textContent = num(rateMax * (1 - i / 4), rateMax >= 10 ? 0 : 1);
    const right = svg("text", { x: width - pad.r + 6, y: y + 4 });
    right.textContent = +(latMax * (1 - i / 4)).toPrecision(3) + (i === 0 ? " ms" : "");
    chart.append(left, right);
  }
  for (const [label, t, anchor] of [[ago(span), now - span, "start"], [ago(span / 2), now - span / 2, "middle"], ["now", now, "end"]]) {
    const text = svg("text", { x: x(t), y: height - 4, "text-anchor": anchor });
    text.textContent = label;
    chart.append(text);
  }
  const line = (points, color, dash) => {
    if (points.length < 2) return;
    chart.append(svg("polyline", {
      points: points.map(([px, py]) => `${px.toFixed(1)},${py.toFixed(1)}`).join(" "),
      fill: "none", stroke: color, "stroke-width": 2, "stroke-linejoin": "round",
      "stroke-dasharray": dash || "",
    }));
  };
  const recent = history.filter((p) => p.t >= now - span);
  const css = getComputedStyle(document.documentElement);
  line(recent.map((p) => [x(p.t), yRate(p.requests_per_s)]), css.getPropertyValue("--rate"));
  line(recent.map((p) => [x(p.t), yRate(p.failures_per_s)]), css.getPropertyValue("--fail"));
  line(recent.filter((p) => p.p99_ms !== null).map((p) => [x(p.t), yLat(p.p99_ms)]), css.getPropertyValue("--p99"), "4 3");
}

let ticks = 0;
let lastHistory = [];

function render(state) {
  ticks += 1;
  const badge = $("server-state");
  badge.textContent = state.ready ? "ready" : "not ready";
  badge.className = "badge " + (state.ready ? "ready" : "down");
  const updated = $("updated");
  updated.textContent = `updated ${new Date().toLocaleTimeString()} · up ${Math.floor(state.uptime_s / 60)} min`;
  updated.dataset.ticks = String(ticks);
  const last = state.history.length ? state.history[state.history.length - 1] : null;
  $("total-rate").textContent = last ? num(last.requests_per_s) : "–";
  $("total-fail").textContent = last ? num(last.failures_per_s) : "–";
  $("total-p99").textContent = last && last.p99_ms !== null ? ms(last.p99_ms) + " ms" : "–";
  const cards = state.models.map(modelCard);
  if (!cards.length) cards.push(el("div", { class: "card empty muted" }, "no models in the repository"));
  $("models").replaceChildren(...cards);
  lastHistory = state.history;
  drawChart(lastHistory);
}

function connect() {
  const source = new EventSource("/dashboard/events");
  source.onmessage = (event) => render(JSON.parse(event.data));
  source.onerror = () => {
    const badge = $("server-state");
    badge.textContent = "reconnecting…";
    badge.className = "badge down";
  };
}

window.addEventListener("resize", () => drawChart(lastHistory));
connect();
