// graymq console: fetches the page's server-rendered fragment with the session's bearer token, refreshes it,
// and runs actions after a confirmation. The token lives in sessionStorage only, never in a URL.
"use strict";

const TOKEN_KEY = "graymq-console-token";
const content = document.getElementById("content");
const statusBox = document.getElementById("status");
let lastHtml = "";
let timer = null;
let loading = false;  // one fetch at a time: a refresh asked for meanwhile runs when it ends
let again = false;
let known = false;  // the group page's fragment loaded: the group exists (an unknown one gets a 404)

// Promote and rollback act on a group's release: offered only once the page showed the group exists.
function showCutoverControls() {
  for (const id of ["cutover-controls", "rollout-form"]) {
    const controls = document.getElementById(id);
    if (controls) controls.hidden = !known;
  }
  showLaneChoices();
}

// The lane chooser of promote and rollback: gray, and every lane the page shows (none but gray: hidden).
function showLaneChoices() {
  const select = document.getElementById("cutover-lane");
  if (!select) return;
  const shown = document.getElementById("lane-choices");
  const lanes = ["gray", ...JSON.parse(shown ? shown.dataset.lanes : "[]").filter((lane) => lane !== "gray")];
  const chosen = lanes.includes(select.value) ? select.value : "gray";
  if ([...select.options].map((o) => o.value).join() !== lanes.join()) {
    select.replaceChildren(...lanes.map((lane) => new Option(lane, lane)));
  }
  select.value = chosen;
  document.getElementById("cutover-lane-choice").hidden = lanes.length < 2;
}

// A promote or rollback names the chosen lane (gray is the default: left out, as before lanes).
function withLane(button, action) {
  const select = document.getElementById("cutover-lane");
  if (!button.closest("#cutover-controls") || !select || select.value === "gray") return action;
  return { ...action, lane: select.value };
}

function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

function headers(json) {
  const h = {};
  if (token()) h["Authorization"] = "Bearer " + token();
  if (json) h["Content-Type"] = "application/json";
  return h;
}

function showToken() {
  const dev = document.querySelector(".token[data-dev-mode]") !== null;
  document.getElementById("token-state").textContent = token() ? "token set" : dev ? "no token needed" : "no token";
  document.getElementById("token-forget").hidden = !token();
}

// A refused field as the operator reads it: its name, then why ("step_seconds: Input should be ...").
function fieldError(d) {
  if (!d.msg) return JSON.stringify(d);
  return Array.isArray(d.loc) && d.loc.length ? `${d.loc[d.loc.length - 1]}: ${d.msg}` : d.msg;
}

async function errorText(response) {
  try {
    const body = await response.json();
    const detail = typeof body.detail === "string" ? body.detail
      : Array.isArray(body.detail) ? body.detail.map(fieldError).join("; ")
      : "";  // an object (e.g. the running operation) is data for scripts, not words for the operator
    return `${response.status} ${body.error || ""}${detail ? ": " + detail : ""}`;
  } catch (e) {
    return `${response.status} ${response.statusText}`;
  }
}

function say(text, ok) {
  statusBox.hidden = false;
  statusBox.className = ok ? "ok" : "error";
  statusBox.textContent = text;
}

function fragmentUrl() {
  const url = new URL(content.dataset.fragment, location.origin);
  const clientsPage = new URLSearchParams(location.hash.slice(1)).get("clients");  // a group page's client table
  if (clientsPage) url.searchParams.set("clients_page", clientsPage);
  const filters = document.getElementById("filters");
  if (filters) {
    for (const [key, value] of new FormData(filters)) if (value) url.searchParams.set(key, value);
  }
  return url;
}

async function refresh() {
  clearTimeout(timer);
  if (loading) {
    again = true;
    return;
  }
  loading = true;
  let refused = false;
  try {
    const response = await fetch(fragmentUrl(), { headers: headers(false) });
    if (response.status === 401 || response.status === 429) {
      // Each refused attempt counts against this address's failed-authentication budget: wait for a token.
      refused = true;
      content.innerHTML = "";
      const p = document.createElement("p");
      p.className = "error";
      p.id = "needs-token";
      p.textContent = "This name server needs a token: use Enter token (" + (await errorText(response)) + ")";
      content.appendChild(p);
      lastHtml = "";
      known = false;
    } else if (!response.ok) {
      content.textContent = await errorText(response);
      lastHtml = "";
      known = false;
    } else {
      const html = await response.text();
      if (html !== lastHtml) {
        // a toggle the operator opened (e.g. an audit entry's raw JSON) stays open across refreshes
        const opened = [...content.querySelectorAll("details[open][data-key]")].map((d) => d.dataset.key);
        content.innerHTML = html;
        for (const key of opened) content.querySelector(`details[data-key="${CSS.escape(key)}"]`)?.setAttribute("open", "");
        lastHtml = html;
      }
      known = content.querySelector("[data-group-known]") !== null;
      content.dataset.refreshed = String(Number(content.dataset.refreshed || 0) + 1);
    }
  } catch (e) {
    content.dataset.error = String(e);
  } finally {
    loading = false;
  }
  showCutoverControls();
  const every = Number(content.dataset.refreshMs || 0);
  if (again) {
    again = false;
    refresh();
  } else if (every > 0 && !refused) {
    timer = setTimeout(refresh, every);
  }
}

function confirmWith(text) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-reason").value = "";
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"
      ? document.getElementById("confirm-reason").value : null), { once: true });
  });
}

async function post(path, body) {
  const response = await fetch(path, { method: "POST", headers: headers(true), body: JSON.stringify(body) });
  if (!response.ok) throw new Error(await errorText(response));
  return response.json();
}

// Confirm what ``describe()`` answers (a refusal is shown instead), then post ``body`` to ``path`` with the reason.
async function confirmed(describe, path, body) {
  try {
    const reason = await confirmWith(await describe());
    if (reason === null) return;
    const result = await post(path, { ...body, reason: reason || null });
    say(result.message, true);
  } catch (e) {
    say("refused: " + e.message, false);
  }
  refresh();
}

function groupApi() { return `/console/api/groups/${encodeURIComponent(content.dataset.group)}`; }

async function preview(path, body) { return (await post(path, body)).message; }

function run(action) {
  return confirmed(() => preview(`${groupApi()}/preview`, { action }), `${groupApi()}/actions`, { action });
}

// The rollout form as `graymq gray rollout` takes it: an empty optional threshold is left out (none).
function rolloutRequest(form) {
  const data = new FormData(form);
  const body = { steps: String(data.get("steps")).split(",").map((w) => Number(w.trim())),
                 then: data.get("then") };
  for (const name of ["step_seconds", "max_failure_rate", "failure_margin", "max_p99_ms", "max_lag", "min_messages",
                      "failed_checks", "timeout_s"]) {
    const value = String(data.get(name) || "").trim();
    if (value !== "") body[name] = Number(value);
  }
  const lane = String(data.get("lane") || "").trim();  // none: the gray lane
  if (lane !== "") body.lane = lane;
  return body;
}

const rolloutForm = document.getElementById("rollout-form");
if (rolloutForm) {
  rolloutForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const body = rolloutRequest(rolloutForm);
    confirmed(() => preview(`${groupApi()}/rollout/preview`, body), `${groupApi()}/rollout`, body);
  });
}

function formAction(form) {
  const data = new FormData(form);
  if (form.dataset.kind === "weight") return { action: "weight", weight: Number(data.get("weight")) };
  const selector = {};
  for (const pair of String(data.get("selector")).split(",")) {
    const [key, ...rest] = pair.split("=");
    if (key.trim()) selector[key.trim()] = rest.join("=").trim();
  }
  return { action: "rule", selector, gray: data.get("gray") === "true" };
}

// What an abort will do, for its confirmation: a rollout rolls back, a promote or rollback stops where it is.
function abortText(abort) {
  const id = abort.dataset.operation;
  if (abort.dataset.kind === "rollout") {
    return `aborts rollout #${id} of ${abort.dataset.group}: it leaves its steps and rolls back — weight 0, the `
      + "gray side retires, the normal consumers adopt its queues and what it failed (nothing lost)";
  }
  const lane = abort.dataset.lane && abort.dataset.lane !== "gray" ? ` lane ${abort.dataset.lane}` : "";
  return `stops ${abort.dataset.kind} #${id} of ${abort.dataset.group}${lane} at its current step, recorded FAILED: `
    + "the lane stays as that step left it (nothing lost); promote or roll it back again to end it";
}

window.addEventListener("hashchange", refresh);  // a page of the client table: #clients=N

document.addEventListener("click", (event) => {
  const button = event.target.closest("button.act");
  if (button) run(withLane(button, JSON.parse(button.dataset.action)));
  const abort = event.target.closest("button.abort");
  if (abort) {
    confirmed(async () => abortText(abort), `/console/api/operations/${abort.dataset.operation}/abort`, {});
  }
});

for (const form of document.querySelectorAll("form.act-form")) {
  form.addEventListener("submit", (event) => { event.preventDefault(); run(formAction(form)); });
}

const filters = document.getElementById("filters");
if (filters) {
  const params = new URLSearchParams(location.hash.slice(1));
  for (const [key, value] of params) if (filters.elements[key]) filters.elements[key].value = value;
  filters.addEventListener("submit", (event) => {
    event.preventDefault();
    const shown = new URLSearchParams();
    for (const [key, value] of new FormData(filters)) if (value) shown.set(key, value);
    history.replaceState(null, "", "#" + shown.toString());
    refresh();
  });
}

document.getElementById("token-enter").addEventListener("click", () => {
  const dialog = document.getElementById("token-dialog");
  document.getElementById("token-input").value = "";
  dialog.showModal();
  dialog.addEventListener("close", () => {
    const value = document.getElementById("token-input").value.trim();
    if (dialog.returnValue === "ok" && value) sessionStorage.setItem(TOKEN_KEY, value);
    showToken();
    refresh();
  }, { once: true });
});

document.getElementById("token-forget").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  showToken();
  refresh();
});

showToken();
refresh();

// -- health charts: per side, the last minutes the name server kept (GET .../health), drawn as inline SVG --------
const SVG = "http://www.w3.org/2000/svg";
const CHART = { width: 360, height: 120, left: 44, bottom: 18, top: 6 };
const health = document.getElementById("health");

function svgElement(name, attributes, text) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

function shortNumber(value) {
  return value >= 1000 ? (value / 1000).toFixed(1) + "k" : value >= 10 ? value.toFixed(0) : value.toFixed(1);
}

// A side's line: normal and gray as before lanes, another lane in its colour class (as on the queue map).
function seriesClass(side, colours) {
  return side === "normal" || side === "gray" ? side : `lane ${colours[side] || ""}`;
}

// One metric's chart: every side's line over a shared time axis (the last point at the right edge).
function drawChart(figure, sides, metric, span, colours) {
  const { width, height, left, bottom, top } = CHART;
  const all = Object.values(sides).flat();
  const end = all.reduce((m, p) => Math.max(m, p.at), 0);
  const peak = Math.max(metric === "failure_rate" ? 5 : 1, ...all.map((p) => p[metric])) * 1.1;
  const x = (at) => left + (width - left) * (1 - (end - at) / span);
  const y = (v) => top + (height - bottom - top) * (1 - v / peak);
  const svg = svgElement("svg", { viewBox: `0 0 ${width} ${height}`, role: "img" });
  svg.append(svgElement("line", { x1: left, y1: y(0), x2: width, y2: y(0), class: "axis" }));
  svg.append(svgElement("text", { x: left - 4, y: y(peak) + 10, class: "tick", "text-anchor": "end" },
                        shortNumber(peak)));
  svg.append(svgElement("text", { x: left - 4, y: y(0), class: "tick", "text-anchor": "end" }, "0"));
  svg.append(svgElement("text", { x: left, y: height - 2, class: "tick" }, `-${Math.round(span / 6) / 10} min`));
  svg.append(svgElement("text", { x: width, y: height - 2, class: "tick", "text-anchor": "end" }, "now"));
  const lasts = {};
  for (const side of Object.keys(sides)) {
    const points = sides[side].filter((p) => p.at > end - span);
    if (points.length) {
      const path = points.map((p) => `${x(p.at).toFixed(1)},${y(p[metric]).toFixed(1)}`).join(" ");
      svg.append(svgElement("polyline", { points: path, class: `series ${seriesClass(side, colours)}`,
                                          "data-side": side }));
    }
    lasts[side] = sides[side].length ? sides[side][sides[side].length - 1][metric] : null;
  }
  for (const side of ["normal", "gray"]) figure.dataset[side] = lasts[side] === null ? "" : String(lasts[side]);
  figure.dataset.sides = JSON.stringify(lasts);  // every side's last value, lanes included
  figure.dataset.points = String(sides.gray.length);
  figure.querySelector("svg")?.remove();
  figure.append(svg);
}

function showLaneLegend(lanes, colours) {
  const legend = document.getElementById("lane-legend");
  if (legend.dataset.lanes === lanes.join()) return;
  legend.replaceChildren();
  for (const lane of lanes) {
    const line = document.createElement("i");
    line.className = `lane-line ${colours[lane] || ""}`;
    legend.append(" ", line, " " + lane);
  }
  legend.dataset.lanes = lanes.join();
}

async function refreshHealth() {
  let every = 5000;
  try {
    const response = await fetch(health.dataset.health, { headers: headers(false) });
    if (response.ok) {
      const body = await response.json();
      every = Math.max(1000, body.sample_s * 1000);
      const times = Object.values(body.sides).flat().map((p) => p.at);
      const span = Math.min(900, Math.max(60, Math.max(...times) - Math.min(...times)));  // at least a minute
      for (const figure of health.querySelectorAll("figure.chart")) {
        drawChart(figure, body.sides, figure.dataset.metric, span, body.colours || {});
      }
      showLaneLegend(Object.keys(body.sides).filter((side) => side !== "normal" && side !== "gray"),
                     body.colours || {});
      const count = body.sides.gray.length;
      document.getElementById("health-note").textContent = count
        ? `a point every ${body.sample_s} s over the last ${body.window_s} s, kept by this name server since it started`
        : "no consumer has reported yet (kept by this name server since it started)";
      health.hidden = false;
      health.dataset.refreshed = String(Number(health.dataset.refreshed || 0) + 1);
    }
  } catch (e) {
    health.dataset.error = String(e);
  }
  setTimeout(refreshHealth, every);
}

if (health) refreshHealth();
