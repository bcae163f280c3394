// Shared by the shopper page and the admin panel: API calls, money and
// time formatting, server-clock offset, live stock.
import { Code, Local, Phase } from "./codes.js";

export const $ = (sel, root = document) => root.querySelector(sel);

// userText shows a name someone typed (a sale, an item, a shopper) as
// text, isolated from the text around it (bdi), with any invisible
// direction-control character shown as U+FFFD: the API refuses them, but
// older data may hold one, and "invoice \u202Efdp.exe" would pass for
// "invoice exe.pdf".
export function userText(s) {
  return el("bdi", {}, String(s).replace(/[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, "\ufffd"));
}

// el builds an element: el("div", {class: "x", onclick: f}, child, "text").
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "class") e.className = v;
    else if (v === true) e.setAttribute(k, "");
    else e.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c !== undefined && c !== null && c !== false) e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

// page manages a page's main element across views. Each view calls begin
// first: that stops what the previous view started (timers, sockets) and
// returns the new view's handle. A view that awaits something may have been
// left meanwhile: its show then renders nothing and returns false, its keep
// stops at once, so a slow answer never replaces a newer view.
export function page(root) {
  let gen = 0;
  let stops = [];
  return {
    begin() {
      const mine = ++gen;
      for (const stop of stops) stop();
      stops = [];
      const current = () => mine === gen;
      return {
        current,
        show(...nodes) {
          if (current()) root.replaceChildren(...nodes);
          return current();
        },
        keep(stop) {
          if (current()) stops.push(stop);
          else stop();
        },
      };
    },
  };
}

// nav marks the header link of the current section.
export function nav(current) {
  for (const a of document.querySelectorAll("[data-nav]")) a.classList.toggle("current", a.dataset.nav === current);
}

// ApiError carries the API.md error body.
export class ApiError extends Error {
  constructor(status, code, message, fields = [], retryAfter = 0) {
    super(message);
    this.status = status;
    this.code = code;
    this.fields = fields;
    this.retryAfter = retryAfter;
  }
}

// api sends a JSON request with the session cookie and returns the decoded
// body, or throws ApiError (Local.Network when the server cannot be reached).
export async function api(method, path, body) {
  let res;
  try {
    res = await fetch(path, {
      method,
      credentials: "same-origin",
      headers: body === undefined ? {} : { "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiError(0, Local.Network, "The server cannot be reached. Check your connection.");
  }
  noteServerDate(res);
  let data = null;
  try {
    data = await res.json();
  } catch (e) {
    data = null;
  }
  if (!res.ok) {
    const err = (data && data.error) || {};
    throw new ApiError(res.status, err.code || Code.Internal, err.message || `HTTP ${res.status}`,
      err.fields || [], Number(res.headers.get("Retry-After")) || 0);
  }
  return data;
}

// Server clock: countdowns use the server's time, never the browser's.
let offsetMs = 0;
let offsetKnown = false;
export function noteServerTime(iso, sentAt = Date.now(), receivedAt = Date.now()) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return;
  offsetMs = t - (sentAt + receivedAt) / 2;
  offsetKnown = true;
}
function noteServerDate(res) {
  // Second resolution only: used until a finer server_time arrives.
  if (offsetKnown) return;
  const d = res.headers.get("Date");
  if (d) offsetMs = Date.parse(d) + 500 - Date.now();
}
export const serverNow = () => Date.now() + offsetMs;

export const money = (cents) =>
  (cents / 100).toLocaleString(undefined, { style: "currency", currency: "USD" });

// duration formats milliseconds as "1d 02:03:04" / "02:03" .
export function duration(ms) {
  const s = Math.max(0, Math.ceil(ms / 1000));
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
  const pad = (n) => String(n).padStart(2, "0");
  const hms = h > 0 || d > 0 ? `${pad(h)}:${pad(m)}:${pad(s % 60)}` : `${pad(m)}:${pad(s % 60)}`;
  return d > 0 ? `${d}d ${hms}` : hms;
}

export const localTime = (iso) => new Date(iso).toLocaleString();

export const statusLabel = {
  [Phase.Scheduled]: "Starts soon", [Phase.Active]: "On sale", [Phase.Paused]: "Paused", [Phase.SoldOut]: "Sold out",
  [Phase.Ended]: "Ended",
};

// status as of now, from a sale's fields (the server sends it too; this
// keeps countdown pages right between updates).
export function liveStatus(sale) {
  const now = serverNow();
  if (sale.status === Phase.Ended || now >= Date.parse(sale.ends_at)) return Phase.Ended;
  if (sale.status === Phase.Paused) return Phase.Paused;
  if (now < Date.parse(sale.starts_at)) return Phase.Scheduled;
  if (sale.remaining <= 0) return Phase.SoldOut;
  return Phase.Active;
}

// watchStock follows a sale's stock: a WebSocket that reconnects with
// backoff, and polling of the sale while the socket is down. onStock gets
// {remaining, status, total?, sold?}; onQueue the waiting room's frames
// (admitted_through, queue_size, status). Returns a function that stops it.
export function watchStock(saleId, onStock, onMode = () => {}, onQueue = () => {}) {
  let ws = null, stopped = false, failures = 0, pollTimer = null, retryTimer = null;
  const poll = async () => {
    try {
      const sent = Date.now();
      const s = await api("GET", `/api/sales/${saleId}`);
      noteServerTime(s.server_time, sent, Date.now());
      onStock(s);
    } catch (e) { /* keep trying */ }
  };
  const startPolling = () => {
    if (pollTimer || stopped) return;
    onMode("polling");
    poll();
    pollTimer = setInterval(poll, 2000);
  };
  const stopPolling = () => { clearInterval(pollTimer); pollTimer = null; };
  const connect = () => {
    if (stopped) return;
    const proto = location.protocol === "https:" ? "wss" : "ws";
    try {
      ws = new WebSocket(`${proto}://${location.host}/ws/sales/${saleId}`);
    } catch (e) {
      return retry();
    }
    ws.onmessage = (ev) => {
      failures = 0;
      stopPolling();
      onMode("live");
      const m = JSON.parse(ev.data);
      if (m.type !== "stock" && m.type !== "queue") return;
      noteServerTime(m.at);
      (m.type === "stock" ? onStock : onQueue)(m);
    };
    ws.onclose = () => { ws = null; retry(); };
  };
  const retry = () => {
    if (stopped) return;
    failures++;
    if (failures >= 2) startPolling();
    const delay = Math.min(10000, 500 * 2 ** Math.min(failures, 5)) * (0.75 + Math.random() / 2);
    retryTimer = setTimeout(connect, delay);
  };
  connect();
  return () => {
    stopped = true;
    stopPolling();
    clearTimeout(retryTimer);
    if (ws) ws.close();
  };
}

// ticker calls fn every interval and immediately; returns a stop function.
export function ticker(fn, ms = 250) {
  fn();
  const t = setInterval(fn, ms);
  return () => clearInterval(t);
}
