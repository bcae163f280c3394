// Shared by the shopper page and the admin panel: API calls, money and
// time formatting, statements, server-clock offset, live stock.
import { Code, Local, Phase, TransferKind } from "./codes.js";

export const $ = (sel, root = document) => root.querySelector(sel);

// Languages: every string the pages show is in one catalogue per
// language (/static/i18n/<lang>.json; the server answers refusals from
// the same files), chosen by the shopper (kept in localStorage) or else
// by the browser's languages; numbers, money and times are written the
// language's way. loadLanguage runs before a page draws anything.
export const languages = [{ tag: "en", name: "English" }, { tag: "zh-CN", name: "简体中文" }];
const langKey = "seckill.lang";
let lang = "en";
let catalogue = {};
export const currentLang = () => lang;

function pickLang() {
  let saved = null;
  try { saved = localStorage.getItem(langKey); } catch (e) { /* private mode: the browser's */ }
  if (languages.some((l) => l.tag === saved)) return saved;
  for (const l of navigator.languages || [navigator.language || "en"]) {
    if (/^zh(-|$)/i.test(l)) return "zh-CN"; // Traditional readers get the closest we have
    if (/^en(-|$)/i.test(l)) return "en";
  }
  return "en";
}

export async function loadLanguage() {
  lang = pickLang();
  document.documentElement.lang = lang;
  try {
    catalogue = await (await fetch(`/static/i18n/${lang}.json`)).json();
  } catch (e) {
    catalogue = {}; // the keys show; the page still works
  }
  for (const e of document.querySelectorAll("[data-i18n]")) e.textContent = t(e.dataset.i18n);
  if (document.documentElement.dataset.title) document.title = t(document.documentElement.dataset.title);
  $("#lang-slot")?.replaceChildren(languageSwitch());
}

// t is key's string in the page's language, its {name}s filled from
// vars; with vars.n, the plural form key.one / key.other the language
// picks for n.
export function t(key, vars = {}) {
  let s = catalogue[key];
  if (typeof vars.n === "number") {
    s = catalogue[`${key}.${new Intl.PluralRules(lang).select(vars.n)}`] ?? catalogue[`${key}.other`] ?? s;
  }
  if (s === undefined) return key;
  return s.replace(/\{(\w+)\}/g, (m, k) => (k in vars ? String(vars[k]) : m));
}

// tx is t for a sentence with parts that are elements: it returns the
// string's pieces with each {name} replaced by vars[name] as it is (a
// node stays a node), for el's children.
export function tx(key, vars = {}) {
  const s = t(key, Object.fromEntries(Object.entries(vars).filter(([, v]) => !(v instanceof Node))));
  const out = [];
  let last = 0;
  for (const m of s.matchAll(/\{(\w+)\}/g)) {
    out.push(s.slice(last, m.index), m[1] in vars ? vars[m[1]] : m[0]);
    last = m.index + m[0].length;
  }
  out.push(s.slice(last));
  return out.filter((p) => p !== "");
}

// languageSwitch is the header's choice of language: choosing reloads
// the page in it.
export function languageSwitch() {
  const sel = el("select", { id: "lang", "aria-label": t("lang.choose"), class: "lang", onchange: () => {
    try { localStorage.setItem(langKey, sel.value); } catch (e) { /* this page only */ }
    location.reload();
  } }, languages.map((l) => el("option", { value: l.tag, selected: l.tag === lang, lang: l.tag }, l.name)));
  return sel;
}

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
          // A missing part (null, undefined, false) shows nothing, never
          // the word "null".
          if (current()) root.replaceChildren(...nodes.flat().filter((n) => n !== null && n !== undefined && n !== false));
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

// cards makes a table readable on a phone: below 640 px each row is a
// card and each cell shows its column's heading (data-label), so no
// figure or action is cut off or hidden. Returns the table.
export function cards(table) {
  const heads = [...table.querySelectorAll("thead th")].map((th) => th.textContent);
  table.classList.add("cards");
  for (const tr of table.querySelectorAll("tbody tr")) {
    [...tr.children].forEach((td, i) => { if (heads[i]) td.dataset.label = heads[i]; });
  }
  return table;
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
export function api(method, path, body) {
  return request(method, path, body === undefined ? undefined : JSON.stringify(body), "application/json");
}

// sendFile sends a file (a Blob) as the body, as it is (an image upload),
// answered like api.
export function sendFile(method, path, file) {
  return request(method, path, file, file.type || "application/octet-stream");
}

async function request(method, path, body, type) {
  let res;
  try {
    res = await fetch(path, {
      method,
      credentials: "same-origin",
      // Refusals come back in the page's language (their codes never change).
      headers: body === undefined ? { "Accept-Language": lang } : { "Accept-Language": lang, "Content-Type": type },
      body,
    });
  } catch (e) {
    throw new ApiError(0, Local.Network, t("common.network"));
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

// Money is integer minor units of the deployment's currency (ISO 4217),
// which the pages learn from the first balance they read (USD until then).
let currency = "USD";
export function setCurrency(c) {
  if (typeof c === "string" && /^[A-Z]{3}$/.test(c)) currency = c;
}
export const currentCurrency = () => currency;

// minorDigits is how many of the currency's minor units make a unit's
// decimals: 2 for USD, 0 for JPY, 3 for BHD.
export const minorDigits = (c = currency) =>
  new Intl.NumberFormat(lang, { style: "currency", currency: c }).resolvedOptions().maximumFractionDigits;

// toUnits writes an integer of minor units as a decimal string of units,
// exactly ("4999" → "49.99"), never through a float.
export function toUnits(minor, c = currency) {
  const d = minorDigits(c);
  const n = BigInt(minor);
  const abs = n < 0n ? -n : n;
  const whole = (abs / 10n ** BigInt(d)).toString();
  const frac = d ? "." + (abs % 10n ** BigInt(d)).toString().padStart(d, "0") : "";
  return (n < 0n ? "-" : "") + whole + frac;
}

// money formats minor units as an amount in the currency; signed shows a
// + before a positive amount (a statement's credits).
export function money(minor, signed = false) {
  const f = new Intl.NumberFormat(lang, { style: "currency", currency, signDisplay: signed ? "exceptZero" : "auto" });
  return f.format(toUnits(minor)); // a decimal string formats exactly
}

// parseUnits reads an amount typed in units ("20", "20.5", "20,50") as an
// integer of minor units, exactly; null when it is not one: a sign,
// thousands separators, more decimals than the currency has, or beyond
// what a number holds exactly.
export function parseUnits(s, c = currency) {
  const d = minorDigits(c);
  const m = String(s).trim().match(d ? new RegExp(`^(\\d+)(?:[.,](\\d{0,${d}}))?$`) : /^(\d+)$/);
  if (!m) return null;
  const n = BigInt(m[1]) * 10n ** BigInt(d) + BigInt((m[2] || "").padEnd(d, "0") || "0");
  return n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : null;
}

// requestID is a random id for a request the server makes once however
// often it is sent (22 characters of A-Z a-z 0-9 _ -).
export function requestID() {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return btoa(String.fromCharCode(...b)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

// labels is a table of the catalogue's words by a code or a state:
// labels("common.kind")[TransferKind.Topup] is "common.kind.topup"'s
// string (undefined for one the catalogue lacks).
const labels = (prefix) => new Proxy({}, { get: (_, k) => (typeof k === "string" && `${prefix}.${k}` in catalogue ? t(`${prefix}.${k}`) : undefined) });

// kindLabel names a statement line's kind.
export const kindLabel = labels("common.kind");

// The platform's account (seckill.PlatformAccount): a fee it pays is the
// fee of a refunded order, going back to the wallet.
const platformAccount = "platform";
const lineLabel = (tr) => (tr.kind === TransferKind.Fee && tr.debit === platformAccount ? t("common.kind.fee_returned")
  : tr.kind === TransferKind.Void && tr.payout_id ? t("common.kind.payout_returned") : kindLabel[tr.kind] || tr.kind);

// statement shows an account's statement, newest first: load(before)
// answers a page ({transfers, next_before_id?}); "Load more" appends the
// older lines. action(line), if given, adds to a line what may be done
// with it (a refund button) or nothing; it is called newest line first. refresh() reads the first page
// again and answers it, showing it only when it holds a newer line (the
// older pages loaded stay).
export function statement(account, load, action = null) {
  const body = el("tbody", {});
  const more = el("button", { class: "small", id: "statement-more", type: "button", hidden: true }, t("common.statement.more"));
  const err = el("p", { class: "err", id: "statement-error", role: "alert" });
  const empty = el("p", { class: "empty", id: "statement-empty", hidden: true }, t("common.statement.empty"));
  const table = el("div", { class: "table-wrap", hidden: true }, el("table", { class: "statement" },
    el("thead", {}, el("tr", {}, el("th", {}, t("common.statement.what")), el("th", { class: "amount" }, t("common.statement.amount")),
      el("th", { class: "amount" }, t("common.statement.balance")))),
    body));
  let next = "", newest = null;
  const row = (tr) => {
    const incoming = tr.credit === account;
    const ref = tr.order_id ? tx("common.statement.order", { order: orderRef(tr.order_id) })
      : tr.payout_id ? tx("common.statement.payout", { payout: el("span", { class: "mono" }, tr.payout_id) }) : [];
    const act = action ? action(tr) : null;
    return el("tr", { "data-transfer": tr.id, "data-kind": tr.kind },
      el("td", {}, el("strong", {}, lineLabel(tr)), el("div", { class: "muted small" }, localTime(tr.at)),
        ref.length ? el("div", { class: "muted small" }, ref) : null, act ? el("div", { class: "line-action" }, act) : null),
      el("td", { class: `amount ${incoming ? "in" : "out"}` }, money(incoming ? tr.amount_cents : -tr.amount_cents, true)),
      el("td", { class: "amount" }, money(tr.balance_after_cents)));
  };
  const show = (page, append) => {
    const rows = page.transfers.map(row);
    if (append) body.append(...rows); else body.replaceChildren(...rows);
    next = page.next_before_id || "";
    more.hidden = !next;
    table.hidden = body.children.length === 0;
    empty.hidden = !table.hidden;
  };
  more.onclick = async () => {
    more.disabled = true;
    err.textContent = "";
    try {
      show(await load(next), true);
    } catch (e) {
      err.textContent = e.message;
    }
    more.disabled = false;
  };
  return {
    box: el("div", { class: "statement-box" }, table, empty, err, more),
    async refresh() {
      let page;
      try {
        page = await load("");
      } catch (e) {
        err.textContent = e.message;
        throw e;
      }
      err.textContent = "";
      const first = page.transfers.length ? page.transfers[0].id : "";
      if (newest !== first) show(page, false);
      newest = first;
      return page;
    },
  };
}

// keepCurrent keeps a view's balance and statement current while it
// shows them. The statement is the ledger's, a moment behind the balance
// (a movement moves the account it is decided on at once, and its other
// accounts once the ledger holds it): read() (the balance, in cents, also
// shown) and the statement's first page are read every 2 s while they
// disagree or a change awaited is not in the statement yet (behind tells
// so), every 10 s otherwise; also while busy() says something is pending.
// awaiting(found) reads at once and awaits the line found(transfers)
// finds, a minute at most.
export function keepCurrent(view, read, st, behind, busy = async () => false) {
  let timer = 0, running = false, again = false, expect = null, until = 0;
  const tick = async () => {
    clearTimeout(timer);
    if (running) { again = true; return; }
    running = true;
    let caughtUp = true, pending = false;
    if (!document.hidden) {
      let cents = null, page = null;
      try { [cents, page] = await Promise.all([read(), st.refresh()]); } catch (e) { /* shown; asked again */ }
      if (expect && (Date.now() > until || (page && expect(page.transfers)))) expect = null;
      const newest = page && page.transfers.length ? page.transfers[0].balance_after_cents : 0;
      caughtUp = cents === null || page === null || (newest === cents && !expect);
      behind.hidden = caughtUp;
      try { pending = await busy(); } catch (e) { /* asked again */ }
    }
    running = false;
    if (!view.current()) return;
    if (again) { again = false; return tick(); }
    timer = setTimeout(tick, caughtUp && !pending ? 10000 : 2000);
  };
  view.keep(() => clearTimeout(timer));
  tick();
  return {
    awaiting(found) {
      expect = found;
      until = Date.now() + 60000;
      tick();
    },
  };
}

// duration formats milliseconds as "1d 02:03:04" / "02:03" .
export function duration(ms) {
  const s = Math.max(0, Math.ceil(ms / 1000));
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
  const pad = (n) => String(n).padStart(2, "0");
  const hms = h > 0 || d > 0 ? `${pad(h)}:${pad(m)}:${pad(s % 60)}` : `${pad(m)}:${pad(s % 60)}`;
  return d > 0 ? `${d}d ${hms}` : hms;
}

// orderRef shows an order by a short reference: the last 8 characters of
// its id's random part, enough to tell a shopper's orders apart (and what
// a merchant and a shopper read to each other); the whole id is its title
// and its data-order-id.
export function orderRef(id, attrs = {}) {
  return el("span", { class: "mono ref", title: id, "data-order-id": id, ...attrs }, "#" + String(id).split("-")[0].slice(-8));
}

export const localTime = (iso) => new Date(iso).toLocaleString(lang);

// number writes a count the language's way (1,234 or 1,234).
export const number = (n) => Number(n).toLocaleString(lang);

// statusLabel names a sale's status (its Phase).
export const statusLabel = labels("common.status");

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
