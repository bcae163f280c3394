// The shopper page: sign in, sale list, sale page with live stock and the
// buy button, my orders, the wallet (balance, top-up, statement). Hash
// routes: #/, #/sales/{id}, #/orders, #/wallet (?amount={cents}&order={id}:
// a top-up of what an order lacks, filled in).
import {
  $, el, userText, api, page, nav, money, duration, localTime, statusLabel, liveStatus, watchStock, ticker,
  noteServerTime, serverNow, setCurrency, currentCurrency, toUnits, parseUnits, requestID, statement, keepCurrent, orderRef, cards,
  loadLanguage, t, tx, number,
} from "./common.js";
import { Code, Local, Phase, QueueStatus, OrderStatus, TopupStatus } from "./codes.js";
import { passkeysSupported, registerPasskey, signInWithPasskey } from "./passkey.js";

const pg = page($("#app"));
let me = null; // {user_id, name, verified, kind}

let identity = { sources: ["guest"], oidc_login: null, passkeys: false }; // GET /api/identity

function renderWho() {
  const who = $("#who");
  if (!me) return who.replaceChildren();
  const extra = [];
  if (me.kind === "account" && me.verified && identity.passkeys && passkeysSupported()) {
    extra.push(el("button", { class: "ghost small", id: "add-passkey", onclick: addPasskey }, t("shop.who.add_passkey")));
  }
  who.replaceChildren(...[
    el("span", { class: "hide-narrow" }, t("shop.who.signed_in_as")), " ", el("strong", { id: "who-name" }, userText(me.name)),
    me.verified ? el("span", { class: "badge verified", title: t("shop.who.verified_title") }, t("shop.who.verified")) : null,
    ...extra,
    el("button", { class: "ghost small", id: "signout", onclick: signOut }, t("shop.who.sign_out")),
  ].filter(Boolean));
  renderBanner();
}

// renderBanner asks an account not yet verified to confirm its email.
function renderBanner() {
  document.querySelector(".banner")?.remove();
  if (!me || me.kind !== "account" || me.verified) return;
  const msg = el("span", {}, t("shop.banner.confirm") + " ");
  const again = el("button", { class: "ghost small", id: "resend", onclick: async () => {
    again.disabled = true;
    try {
      await api("POST", "/api/accounts/resend", {});
      msg.textContent = t("shop.banner.sent") + " ";
    } catch (e) {
      msg.textContent = e.message + " ";
      again.disabled = false;
    }
  } }, t("shop.banner.resend"));
  document.querySelector("header.top").after(el("div", { class: "banner" }, msg, again));
}

async function addPasskey() {
  const b = $("#add-passkey");
  b.disabled = true;
  try {
    await registerPasskey();
    b.textContent = t("shop.who.passkey_added");
  } catch (e) {
    alert(e.message || t("shop.who.passkey_failed"));
    b.disabled = false;
  }
}

function signedIn(s) {
  me = { user_id: s.user_id, name: s.name, verified: !!s.verified, kind: kindOf(s.user_id) };
  renderWho();
}

// kindOf tells a user id's source by its prefix ("o_" the provider's, as
// API.md derives it; "a_" a built-in account's, docs/api.md; anything else
// a guest's).
const kindOf = (id) => (id.startsWith("o_") ? "oidc" : id.startsWith("a_") ? "account" : "guest");

async function signOut() {
  try { await api("DELETE", "/api/session"); } catch (e) { /* the cookie goes anyway on expiry */ }
  me = null;
  renderWho();
  route();
}

// signInView shows the sign-ins the deployment offers: the shop's
// provider, email and password (or a new account), a passkey, a guest name.
function signInView(next) {
  const v = pg.begin();
  nav("");
  const has = (src) => identity.sources.includes(src);
  const parts = [el("h1", {}, t("shop.signin.title"))];
  const err = el("p", { class: "err", id: "signin-error", role: "alert" });
  const run = (button, fn) => async (ev) => {
    ev?.preventDefault();
    button.disabled = true;
    err.textContent = "";
    try {
      signedIn(await fn());
      next();
    } catch (e) {
      err.textContent = e.message;
      button.disabled = false;
    }
  };
  if (has("oidc") && identity.oidc_login) {
    const back = location.pathname + location.hash;
    parts.push(el("a", { class: "button primary", id: "signin-oidc",
      href: `${identity.oidc_login}?next=${encodeURIComponent(back)}` }, t("shop.signin.oidc")));
  }
  if (has("accounts")) {
    const email = el("input", { id: "email", type: "email", maxlength: "254", required: true, autocomplete: "username" });
    const password = el("input", { id: "password", type: "password", minlength: "10", maxlength: "256", required: true,
      autocomplete: "current-password" });
    const signIn = el("button", { class: "primary", type: "submit", id: "signin-password" }, t("shop.signin.submit"));
    const signUp = el("button", { class: "ghost", type: "button", id: "signup" }, t("shop.signin.signup"));
    signUp.onclick = () => {
      if (!email.reportValidity() || !password.reportValidity()) return;
      run(signUp, () => api("POST", "/api/accounts", { email: email.value, password: password.value }))();
    };
    parts.push(el("form", { class: "stack", onsubmit: run(signIn, () =>
      api("POST", "/api/session", { email: email.value, password: password.value })) },
    el("label", {}, t("shop.signin.email"), email), el("label", {}, t("shop.signin.password"), password),
    el("div", { class: "row" }, signIn, signUp)));
    if (identity.passkeys && passkeysSupported()) {
      const pk = el("button", { class: "ghost", type: "button", id: "signin-passkey" }, t("shop.signin.passkey"));
      pk.onclick = run(pk, signInWithPasskey);
      parts.push(pk);
    }
  }
  if (has("guest")) {
    const name = el("input", { id: "name", name: "name", maxlength: "64", required: true, autocomplete: "nickname", placeholder: t("shop.signin.name_example") });
    const submit = el("button", { class: "primary", type: "submit", id: "signin" }, t("shop.signin.guest"));
    parts.push(el("form", { class: "stack", onsubmit: run(submit, () => api("POST", "/api/session", { name: name.value })) },
      el("p", { class: "muted" }, t("shop.signin.guest_note")),
      el("label", {}, t("shop.signin.name"), name), submit));
  }
  if (parts.length === 1) parts.push(el("p", { class: "muted" }, t("shop.signin.none")));
  // A sign-in at the provider that failed comes back with the reason.
  const failed = new URLSearchParams(location.search).get("signin_error");
  if (failed) {
    err.textContent = failed;
    history.replaceState(null, "", "/" + location.hash);
  }
  parts.push(err);
  v.show(el("div", { class: "card signin" }, parts));
  (document.querySelector("#email") || document.querySelector("#name"))?.focus();
}

// verifyView confirms an account's email with the token of its link
// (/verify?token=…), then goes on to the sales.
async function verifyView() {
  const v = pg.begin();
  nav("");
  const token = new URLSearchParams(location.search).get("token") || "";
  history.replaceState(null, "", "/"); // the token leaves the address bar and the history
  const toSales = (label) => el("a", { class: "button primary", href: "#/", onclick: (ev) => { ev.preventDefault(); location.hash = "#/"; route(); } }, label);
  const box = el("div", { class: "card signin", id: "verify" }, el("h1", {}, t("shop.verify.title")), el("p", {}, t("shop.verify.checking")));
  v.show(box);
  try {
    const s = await api("POST", "/api/accounts/verify", { token });
    if (s.token) signedIn(s);
    box.replaceChildren(el("h1", {}, t("shop.verify.done")), el("p", {}, tx("shop.verify.thanks", { email: userText(s.email) })),
      toSales(t("shop.verify.to_sales")));
  } catch (e) {
    box.replaceChildren(el("h1", {}, t("shop.verify.title")), el("p", { class: "err" }, e.message), toSales(t("shop.verify.to_sales")));
  }
}

// The sale list.
async function salesView() {
  const v = pg.begin();
  nav("sales");
  let list;
  try {
    const sent = Date.now();
    list = (await api("GET", "/api/sales")).sales;
    if (list.length) noteServerTime(list[0].server_time, sent, Date.now());
    if (list.length) setCurrency(list[0].currency); // prices are in the sale's currency
  } catch (e) {
    return v.show(el("p", { class: "result bad" }, e.message));
  }
  // Ended sales go under "Past", newest first, without a stock bar.
  const past = list.filter((s) => liveStatus(s) === Phase.Ended).sort((a, b) => Date.parse(b.ends_at) - Date.parse(a.ends_at));
  const live = list.filter((s) => liveStatus(s) !== Phase.Ended);
  const cards = live.map((s) => {
    const badge = el("span", { class: "badge" });
    const when = el("span", { class: "muted" });
    const fill = el("div");
    const left = el("span");
    const of = el("span");
    const card = el("a", { class: "card sale-card", href: `#/sales/${s.id}`, "data-sale": s.id },
      s.image_url ? el("img", { class: "thumb", src: s.image_url, alt: "", loading: "lazy" }) : null,
      el("div", { class: "row" }, badge, when),
      el("div", { class: "item" }, userText(s.item)),
      el("div", { class: "muted" }, userText(s.name)),
      el("div", { class: "price" }, money(s.price_cents)),
      el("div", { class: "bar" }, fill),
      el("div", { class: "stock-line" }, left, of));
    const paint = () => {
      const st = liveStatus(s);
      badge.className = `badge ${st}`;
      badge.textContent = statusLabel[st] || st;
      when.textContent = st === Phase.Scheduled ? t("shop.list.starts_in", { time: duration(Date.parse(s.starts_at) - serverNow()) })
        : st === Phase.Active ? t("shop.list.ends_in", { time: duration(Date.parse(s.ends_at) - serverNow()) }) : "";
      fill.style.width = `${Math.min(100, (100 * s.remaining) / Math.max(1, s.total))}%`;
      left.textContent = st === Phase.SoldOut ? t("shop.list.none_left") : t("shop.stock.left", { n: s.remaining, count: number(s.remaining) });
      of.textContent = t("shop.stock.of", { total: number(s.total) });
    };
    v.keep(ticker(paint, 500));
    return card;
  });
  const pastCards = past.map((s) => el("a", { class: "card sale-card past", href: `#/sales/${s.id}`, "data-sale": s.id },
    el("div", { class: "row" }, el("span", { class: `badge ${Phase.Ended}` }, statusLabel[Phase.Ended]),
      // Ended early, a sale has no closing time to show.
      Date.parse(s.ends_at) <= serverNow() ? el("span", { class: "muted" }, localTime(s.ends_at)) : null),
    el("div", { class: "item" }, userText(s.item)),
    el("div", { class: "muted" }, userText(s.name)),
    el("div", { class: "muted" }, t("shop.list.sold_of", { sold: number(s.total - s.remaining), total: number(s.total) }))));
  v.show(el("h1", {}, t("shop.list.title")),
    cards.length ? el("div", { class: "grid", id: "live-sales" }, cards)
      : el("p", { class: "empty" }, t("shop.list.empty")),
    pastCards.length ? el("details", { class: "past-sales", id: "past-sales" },
      el("summary", {}, t("shop.list.past", { n: pastCards.length })), el("div", { class: "grid" }, pastCards)) : null);
}

// The title of each refusal a buy can get (its catalogue key), and
// whether it is final (bad) or may pass (warn); the detail is the
// server's message.
const outcomes = new Map([
  [Code.LimitExceeded, ["warn", "shop.outcome.limit"]],
  [Code.NotStarted, ["warn", "shop.outcome.not_started"]],
  [Code.Ended, ["bad", "shop.outcome.ended"]],
  [Code.Paused, ["warn", "shop.outcome.paused"]],
  [Code.RateLimited, ["warn", "shop.outcome.rate_limited"]],
  [Code.Unavailable, ["warn", "shop.outcome.busy"]],
  [Local.Network, ["warn", "shop.outcome.network"]],
  [Code.TicketRequired, ["warn", "shop.outcome.check_failed"]],
  [Code.TicketInvalid, ["warn", "shop.outcome.check_failed"]],
  [Code.PowInvalid, ["warn", "shop.outcome.check_failed"]],
  [Local.Pow, ["bad", "shop.outcome.check_failed"]],
  [Code.NotEligible, ["bad", "shop.outcome.verified_only"]],
  [Code.PassRequired, ["warn", "shop.outcome.wait_turn"]],
  [Code.PassInvalid, ["warn", "shop.outcome.pass_expired"]],
  [Code.InsufficientFunds, ["warn", "shop.outcome.short"]],
  [Code.HoldExpired, ["warn", "shop.outcome.hold_expired"]],
]);

function outcome(e, sale) {
  // The page shows a sale sold out already: the refusal says no more.
  if (e.code === Code.SoldOut) {
    return sale.remaining > 0 ? { kind: "warn", title: t("shop.outcome.not_enough"), detail: t("shop.outcome.only_left", { n: sale.remaining, count: number(sale.remaining) }) }
      : { kind: "bad", title: t("shop.outcome.too_late"), detail: t("shop.outcome.too_late_detail") };
  }
  const [kind, key] = outcomes.get(e.code) || ["bad", "shop.outcome.wrong"];
  const title = t(key);
  const detail = e.code === Code.LimitExceeded ? t("shop.outcome.limit_detail", { limit: number(sale.per_user_limit) })
    // The API's message names its route, for programs; a shopper waits here.
    : e.code === Code.PassRequired ? t("shop.outcome.wait_turn_detail")
      : e.message;
  return { kind, title, detail };
}

// Buy tickets (sales with require_ticket): one a sale, kept while it
// serves, earned with a proof of work in a Web Worker when the sale asks.
const tickets = new Map();

async function buyTicket(sale, progress) {
  const t = tickets.get(sale.id);
  if (t && t.expires - serverNow() > 5000) return t.ticket;
  let body = {};
  if (sale.pow_difficulty > 0) {
    const c = await api("GET", `/api/sales/${sale.id}/challenge`);
    body = { challenge: c.challenge, nonce: await solve(c.challenge, c.difficulty, progress) };
  }
  const r = await api("POST", `/api/sales/${sale.id}/ticket`, body);
  tickets.set(sale.id, { ticket: r.ticket, expires: Date.parse(r.expires_at) });
  return r.ticket;
}

// solve runs pow.js; progress gets the share of the expected work done.
function solve(challenge, difficulty, progress) {
  return new Promise((resolve, reject) => {
    const w = new Worker("/static/pow.js");
    const started = performance.now();
    w.onmessage = (ev) => {
      progress(ev.data.tried / 2 ** difficulty);
      if (ev.data.nonce === undefined) return;
      w.terminate();
      window.seckillPow = { difficulty, tried: ev.data.tried, ms: performance.now() - started };
      resolve(ev.data.nonce);
    };
    w.onerror = (ev) => {
      w.terminate();
      reject({ code: Local.Pow, message: ev.message || t("shop.outcome.pow_failed") });
    };
    w.postMessage({ challenge, difficulty });
  });
}

function randomID() {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return "web-" + Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

// readWallet is the shopper's wallet (GET /api/wallet), which also tells
// the pages the currency.
async function readWallet() {
  const w = await api("GET", "/api/wallet");
  setCurrency(w.currency);
  return w;
}

// showPurse says what the wallet holds, beside a "Pay" button.
function showPurse(box, w) {
  box.replaceChildren(...tx("shop.purse", { balance: el("strong", { class: "purse" }, money(w.balance_cents)) }), " · ",
    el("a", { href: "#/wallet" }, t("shop.topup")));
}

// payOrder pays order id (of amount cents) from the wallet: {paid} with
// the order, or {error}, shown in note. A wallet too low says by how much
// and offers a top-up of what is missing; purse, if given, shows the
// balance read then.
async function payOrder(id, amount, note, purse) {
  note.replaceChildren();
  try {
    return { paid: await api("POST", `/api/orders/${id}/pay`) };
  } catch (error) {
    if (error.code !== Code.InsufficientFunds) {
      note.replaceChildren(el("div", { class: "result bad", id: "pay-error" }, error.message));
      return { error };
    }
    let w = null;
    try { w = await readWallet(); } catch (e) { /* said without the figures */ }
    if (w && purse) showPurse(purse, w);
    const missing = w ? Math.max(1, amount - w.balance_cents) : amount;
    const topUp = el("button", { class: "primary small", id: "topup-missing", type: "button", onclick: () => {
      location.hash = `#/wallet?amount=${missing}&order=${encodeURIComponent(id)}`;
    } }, w ? t("shop.topup_amount", { amount: money(missing) }) : t("shop.topup"));
    note.replaceChildren(el("div", { class: "result warn", id: "insufficient" },
      el("div", { class: "title" }, t("shop.pay.too_low")),
      el("div", { class: "detail" }, w
        ? tx("shop.pay.too_low_detail", { amount: el("strong", {}, money(amount)), balance: el("strong", {}, money(w.balance_cents)),
          missing: el("strong", { id: "missing" }, money(missing)) })
        : error.message),
      el("div", { class: "row", style: "margin-top:.5rem" }, topUp)));
    return { error };
  }
}

async function saleView(id) {
  const v = pg.begin();
  nav("sales");
  let sale;
  try {
    const sent = Date.now();
    sale = await api("GET", `/api/sales/${id}`);
    noteServerTime(sale.server_time, sent, Date.now());
    setCurrency(sale.currency);
  } catch (e) {
    return v.show(el("p", { class: "result bad" }, e.message));
  }
  const badge = el("span", { class: "badge", id: "status" });
  const fill = el("div");
  const left = el("strong", { id: "remaining" });
  const mode = el("span", { class: "mode", id: "mode" }, t("shop.mode.connecting"));
  const countdownLabel = el("div", { class: "muted", id: "countdown-label" });
  const countdown = el("div", { class: "countdown", id: "countdown" });
  const ofTotal = el("span", { id: "total" });
  // What this shopper holds of the sale (countBought): the cap counts
  // it, so the page offers only what is left of it.
  let bought = 0;
  // An instant checkout pays from the wallet in the buy: the page shows
  // the balance, and says before the start when it is short (readPurse).
  let wallet = null;
  const purseLine = sale.instant_checkout ? el("div", { class: "muted", id: "instant-wallet" }) : null;
  const mine = el("span", { class: "muted", id: "yours" });
  const allowed = () => Math.max(0, Math.min(sale.per_user_limit - bought, sale.remaining));
  let qty = 1;
  const qtyOut = el("output", { id: "qty" }, "1");
  const setQty = (n) => { qty = Math.max(1, Math.min(allowed(), n)); qtyOut.textContent = qty; paint(); };
  const minus = el("button", { type: "button", "aria-label": t("shop.sale.fewer"), "data-step": "fewer", onclick: () => setQty(qty - 1) }, "−");
  const plus = el("button", { type: "button", "aria-label": t("shop.sale.more"), "data-step": "more", onclick: () => setQty(qty + 1) }, "+");
  const buy = el("button", { class: "primary big", id: "buy", disabled: true }, t("shop.sale.buy"));
  const result = el("div", { id: "result" });
  const when = el("div", { class: "muted", id: "window" });
  let inFlight = false;
  let retryAt = 0;
  // What the button says while a ticket is being earned.
  let verifying = "";
  const room = sale.waiting_room ? waitingRoom(sale, () => paint()) : null;

  const qtyRow = el("div", { class: "row", id: "qty-row" }, el("span", { class: "muted" }, t("shop.sale.quantity")),
    el("div", { class: "qty" }, minus, qtyOut, plus));
  const paint = () => {
    const st = liveStatus(sale);
    badge.className = `badge ${st}`;
    badge.textContent = statusLabel[st] || st;
    fill.style.width = `${Math.min(100, (100 * sale.remaining) / Math.max(1, sale.total))}%`;
    left.textContent = sale.remaining;
    ofTotal.textContent = t("shop.stock.of", { total: number(sale.total) });
    const now = serverNow();
    if (st === Phase.Scheduled) {
      countdownLabel.textContent = t("shop.sale.starts_in");
      countdown.textContent = duration(Date.parse(sale.starts_at) - now);
    } else if (st === Phase.Active || st === Phase.Paused) {
      countdownLabel.textContent = t("shop.sale.ends_in");
      countdown.textContent = duration(Date.parse(sale.ends_at) - now);
    } else {
      // The badge says "Sold out" or "Ended": this says what it means.
      countdownLabel.textContent = "";
      countdown.textContent = st === Phase.SoldOut ? t("shop.sale.all_taken") : t("shop.sale.over");
    }
    when.textContent = t("shop.sale.window", { opens: localTime(sale.starts_at), closes: localTime(sale.ends_at) });
    const over = st === Phase.SoldOut || st === Phase.Ended;
    const atLimit = bought >= sale.per_user_limit;
    qty = Math.max(1, Math.min(allowed(), qty));
    qtyOut.textContent = qty;
    mine.textContent = bought > 0 ? t("shop.sale.bought", { n: bought, bought: number(bought), limit: number(sale.per_user_limit) })
      : t("shop.sale.limit", { limit: number(sale.per_user_limit) });
    qtyRow.hidden = over || atLimit || sale.per_user_limit === 1;
    minus.disabled = qty <= 1;
    plus.disabled = qty >= allowed();
    if (room) room.paint(now);
    buy.hidden = over || (room ? !room.admitted() : false);
    const cost = qty * sale.price_cents;
    const short = !!(sale.instant_checkout && wallet && wallet.balance_cents < cost);
    buy.disabled = inFlight || st !== Phase.Active || now < retryAt || atLimit || qty > sale.remaining || short;
    buy.textContent = inFlight ? (verifying || t("shop.sale.buying")) : now < retryAt ? t("shop.sale.retry_in", { time: duration(retryAt - now) })
      : atLimit ? t("shop.sale.at_limit") : short ? t("shop.sale.balance_low")
        : sale.instant_checkout ? t("shop.sale.buy_instant", { amount: money(cost) }) : t("shop.sale.buy");
    if (purseLine) paintPurse(over, cost);
  };

  // paintPurse shows the balance an instant checkout pays from, and when
  // it is short of the buy, by how much, with a top-up of the rest.
  const paintPurse = (over, cost) => {
    if (!me || !wallet || over) return purseLine.replaceChildren();
    const missing = cost - wallet.balance_cents;
    const line = [...tx("shop.purse", { balance: el("strong", { class: "purse" }, money(wallet.balance_cents)) })];
    if (missing > 0) {
      line.push(" — ", t("shop.sale.balance_short", { amount: money(cost) }), " ",
        el("a", { class: "button primary small", id: "instant-topup", href: `#/wallet?amount=${missing}` }, t("shop.topup_amount", { amount: money(missing) })));
    } else {
      line.push(" · ", t("shop.sale.instant_note"));
    }
    if (purseLine.dataset.shown !== `${wallet.balance_cents}/${cost}`) {
      purseLine.dataset.shown = `${wallet.balance_cents}/${cost}`;
      purseLine.replaceChildren(...line);
    }
  };
  const readPurse = async () => {
    if (!me || !sale.instant_checkout) return;
    try { wallet = await readWallet(); } catch (e) { return; }
    paint();
  };

  // countBought asks how many units the shopper holds in the sale, as
  // its limit counts them (GET …/mine: one Redis read, no ledger query
  // at a drop's opening).
  const countBought = async () => {
    if (!me) return;
    try { bought = (await api("GET", `/api/sales/${sale.id}/mine`)).bought; } catch (e) { return; }
    paint();
  };

  const showResult = (kind, title, ...detail) => {
    result.replaceChildren(el("div", { class: `result ${kind}`, "data-outcome": kind },
      el("div", { id: "result-title" }, title), el("div", { class: "detail" }, ...detail)));
  };

  const succeeded = async (r) => {
    sale.remaining = Math.min(sale.remaining, r.remaining);
    bought += r.qty;
    if (r.status === OrderStatus.Paid) { // an instant checkout: paid in the buy
      showResult("good", t("shop.sale.bought_paid"),
        el("div", {}, tx("shop.sale.bought_paid_detail", { order: orderRef(r.order_id, { id: "order-id" }), qty: number(r.qty),
          amount: money(r.qty * sale.price_cents) })));
      return readPurse();
    }
    const pay = el("button", { class: "primary", id: "pay" }, t("shop.sale.pay_now"));
    const left = el("span", { class: "countdown", style: "font-size:1.1rem" });
    const purse = el("div", { class: "muted", id: "pay-wallet" });
    const note = el("div", { id: "pay-note" });
    showResult("good", t("shop.sale.got_it"),
      el("div", {}, tx("shop.sale.order_line", { order: orderRef(r.order_id, { id: "order-id" }), qty: number(r.qty), price: money(sale.price_cents) })),
      el("div", { class: "row", style: "margin-top:.5rem" }, pay, el("span", { class: "muted" }, t("shop.sale.pay_within")), left),
      purse, note);
    // Pay works from the first moment: a click before the order's
    // details arrive waits for them.
    let amount = r.qty * sale.price_cents, expires = 0, stop = () => {};
    const details = (async () => {
      const [o, w] = await Promise.allSettled([api("GET", `/api/orders/${r.order_id}`), readWallet()]);
      if (w.status === "fulfilled") showPurse(purse, w.value);
      if (o.status !== "fulfilled") return; // the countdown is unknown
      amount = o.value.amount_cents;
      expires = Date.parse(o.value.expires_at);
      stop = ticker(() => {
        const ms = expires - serverNow();
        left.textContent = duration(ms);
        if (ms <= 0) { pay.disabled = true; left.textContent = t("shop.sale.window_closed"); }
      }, 500);
      v.keep(stop);
    })();
    pay.onclick = async () => {
      pay.disabled = true;
      await details;
      const { paid, error } = await payOrder(r.order_id, amount, note, purse);
      if (paid) {
        stop();
        showResult("good", t("shop.sale.paid"), el("div", {}, tx("shop.sale.paid_detail", { order: orderRef(r.order_id) })));
      } else {
        pay.disabled = error.code === Code.OrderCancelled || (expires > 0 && expires <= serverNow());
      }
    };
    await details;
  };

  buy.onclick = async () => {
    if (!me) return signInView(() => route());
    inFlight = true;
    paint();
    const body = { qty, request_id: randomID() };
    let r = null, err = null;
    // A lost answer is retried with the same request_id: never a second
    // buy. A refused ticket (expired, or the merchant just asked for them)
    // is replaced once.
    for (let attempt = 0, renewed = false; attempt < 3; attempt++) {
      try {
        if (room) body.pass = await room.pass();
        if (sale.require_ticket) {
          body.ticket = await buyTicket(sale, (done) => {
            verifying = t("shop.sale.verifying", { percent: Math.min(99, Math.round(100 * done)) });
            paint();
          });
          verifying = "";
        }
        r = await api("POST", `/api/sales/${id}/buy`, body);
        err = null;
        break;
      } catch (e) {
        err = e;
        verifying = "";
        if ((e.code === Code.TicketRequired || e.code === Code.TicketInvalid) && !renewed) {
          renewed = true;
          sale.require_ticket = true;
          tickets.delete(sale.id);
          continue;
        }
        if ((e.code === Code.PassInvalid || e.code === Code.PassRequired) && room && !renewed) {
          renewed = true;
          room.forgetPass();
          continue;
        }
        if (e.code !== Local.Network && e.code !== Code.Unavailable) break;
        await new Promise((ok) => setTimeout(ok, 300 * (attempt + 1)));
      }
    }
    inFlight = false;
    verifying = "";
    if (r) {
      await succeeded(r);
    } else if (err.code === Code.Unauthenticated) {
      me = null;
      renderWho();
      return signInView(() => route());
    } else {
      if (err.code === Code.SoldOut) sale.remaining = Math.min(sale.remaining, qty - 1);
      const o = outcome(err, sale);
      if (err.code === Code.RateLimited) retryAt = serverNow() + 1000 * (err.retryAfter || 1);
      if (err.code === Code.LimitExceeded) countBought();
      if (err.code === Code.InsufficientFunds) readPurse();
      showResult(o.kind, o.title, o.detail);
    }
    paint();
  };

  v.show(el("div", { class: "sale-page" },
    el("section", { class: "card hero" },
      sale.image_url ? el("img", { class: "product", id: "product-image", src: sale.image_url, alt: sale.item }) : null,
      el("div", { class: "row" }, badge, mode),
      el("div", { class: "item", id: "item" }, userText(sale.item)),
      el("div", { id: "sale-name" }, userText(sale.name)),
      el("div", { class: "price" }, money(sale.price_cents)),
      sale.description ? el("div", { class: "description", id: "description" },
        sale.description.split("\n").map((line) => el("p", {}, userText(line)))) : null),
    el("section", { class: "card buy-box" },
      el("div", {}, countdownLabel, countdown),
      el("div", { class: "bar" }, fill),
      el("div", { class: "stock-line" }, el("span", {}, tx("shop.stock.left_node", { count: left })), ofTotal),
      qtyRow,
      mine,
      sale.verified_only ? el("p", { class: "muted", id: "verified-only" },
        me && me.verified ? t("shop.sale.verified_yes") : t("shop.sale.verified_no")) : null,
      room ? room.box : null,
      purseLine,
      buy,
      result,
      when)));
  countBought();
  readPurse();
  if (sale.instant_checkout) { // a top-up in another tab shows on return
    window.addEventListener("focus", readPurse);
    v.keep(() => window.removeEventListener("focus", readPurse));
  }
  v.keep(watchStock(id, (m) => {
    // Units came back (an order cancelled or refunded): perhaps this
    // shopper's, which frees part of the limit.
    if (m.remaining > sale.remaining && bought > 0) countBought();
    sale.remaining = m.remaining;
    sale.status = m.status;
    // A restock raises the total; a poll's answer carries the limit too.
    if (m.total) sale.total = m.total;
    if (m.per_user_limit) sale.per_user_limit = m.per_user_limit;
    // A merchant may move the window: countdowns follow.
    if (m.starts_at) sale.starts_at = m.starts_at;
    if (m.ends_at) sale.ends_at = m.ends_at;
    paint();
  }, (m) => {
    mode.textContent = m === "live" ? t("shop.mode.live") : t("shop.mode.polling");
    mode.className = `mode ${m}`;
    if (room) room.live = m === "live";
  }, (m) => { if (room) room.frame(m); }));
  v.keep(ticker(paint, 100));
}

// waitingRoom follows the shopper's place in a sale's waiting room: it
// joins once the queue is open (a place before the start is a random draw,
// so there is nothing to gain by hurrying), follows the room's queue
// frames to work out the people ahead and the wait, and fetches the
// admission pass when the shopper's turn comes. repaint redraws the page.
function waitingRoom(sale, repaint) {
  const r = { place: 0, through: 0, size: 0, status: QueueStatus.NotInQueue, soldOut: false, live: false,
    token: "", passExpires: 0, passLife: 0, asking: null, lastAsked: 0, failed: "", rate: sale.admit_per_second,
    // A place drawn before the start moves while others draw theirs: it is
    // provisional until read after the start, and estimated until then.
    provisional: false, joinPlace: 0, joinEarly: 0, early: 0 };
  const title = el("div", { class: "room-title", id: "room-title" });
  const place = el("div", { class: "room-place", id: "room-place" });
  const ahead = el("div", { id: "room-ahead" });
  const wait = el("div", { class: "countdown", id: "room-eta" });
  const note = el("div", { class: "muted", id: "room-note" });
  const join = el("button", { class: "primary", id: "join" }, t("shop.room.join"));
  const opens = Date.parse(sale.queue_opens_at), start = Date.parse(sale.starts_at);
  // Pages open before the queue opens join within a second of it, not
  // all in the same tick.
  const joinAt = serverNow() < opens ? opens + Math.random() * 1000 : 0;

  const take = (q) => {
    if (q.place > 0) {
      r.provisional = serverNow() < start;
      if (r.provisional) { r.joinPlace = q.place; r.joinEarly = q.joined_before_start; }
    }
    r.early = Math.max(r.early, q.joined_before_start || 0);
    r.place = q.place;
    r.through = Math.max(r.through, q.admitted_through);
    r.size = q.queue_size;
    r.status = q.status;
    if (q.status === QueueStatus.SoldOut) r.soldOut = true;
    if (q.pass) {
      r.token = q.pass;
      r.passExpires = Date.parse(q.pass_expires_at);
      r.passLife = r.passExpires - serverNow();
    }
  };
  // ask joins (POST) or reads (GET) the room; one request at a time, a
  // caller during one waits for it.
  const ask = (method) => {
    if (r.asking) return r.asking;
    r.lastAsked = serverNow();
    r.asking = (async () => {
      try {
        take(await api(method, `/api/sales/${sale.id}/queue`));
        r.failed = "";
      } catch (e) {
        if (e.code === Code.SoldOut) r.soldOut = true;
        else r.failed = e.message;
      }
      r.asking = null;
      repaint();
    })();
    return r.asking;
  };
  join.onclick = () => (me ? ask("POST") : signInView(() => route()));

  r.admitted = () => !r.soldOut && !r.provisional && r.place > 0 && r.place <= r.through && r.token !== "";
  r.forgetPass = () => { r.token = ""; };
  // pass is a pass good for a while yet, fetched anew when it is not.
  r.pass = async () => {
    if (!r.token || r.passExpires - serverNow() < Math.min(5000, r.passLife / 4)) {
      r.token = "";
      await ask("GET");
    }
    return r.token;
  };
  // The frames are the room as it is: sold out, or again not (stock a
  // cancelled order returned), and the rate the merchant set.
  r.frame = (m) => {
    r.through = Math.max(r.through, m.admitted_through);
    r.early = Math.max(r.early, m.joined_before_start || 0);
    r.size = m.queue_size;
    r.soldOut = m.status === Phase.SoldOut;
    if (m.admit_per_second) r.rate = m.admit_per_second;
    repaint();
  };
  r.paint = (now) => {
    // Join once the queue is open; fetch the pass once the turn came (or
    // it is about to expire); without the socket, ask every 2 s.
    const calm = !r.failed || now - r.lastAsked > 2000; // after a refusal, ask again in 2 s
    // Until its place is read after the start, a page works with an
    // estimate and reads it as its turn nears: the crowd's reads spread
    // over the admission instead of all coming at the start.
    const est = r.provisional ? estimatePlace(r.joinPlace, r.joinEarly, r.early, r.rate) : { place: r.place, margin: 0 };
    // A pass is renewed with a quarter of its life left (30 s at most).
    const renew = Math.min(30000, r.passLife / 4);
    if (me && !r.soldOut && !r.asking && calm) {
      // Join once the queue is open, and again if the room lost the place.
      if (r.place === 0 && now >= opens && now >= joinAt && (r.lastAsked === 0 || now - r.lastAsked > 2000)) ask("POST");
      else if (r.provisional && now >= start && r.through >= est.place - est.margin) ask("GET");
      else if (!r.provisional && r.place > 0 && r.place <= r.through && (!r.token || r.passExpires - now < renew)) ask("GET");
      else if (r.place > 0 && !r.live && now - r.lastAsked > 2000) ask("GET");
    }
    join.hidden = !!me && (r.place > 0 || now >= opens);
    join.disabled = now < opens || !!r.asking;
    const left = Math.max(0, est.place - r.through);
    if (r.soldOut) {
      title.textContent = t("shop.room.sold_out");
      place.textContent = "";
      ahead.textContent = t("shop.room.sold_out_detail");
      wait.textContent = "";
      note.textContent = "";
    } else if (!me) {
      title.textContent = t("shop.room.title");
      place.textContent = "";
      ahead.textContent = t("shop.room.sign_in");
      wait.textContent = "";
      note.textContent = t("shop.room.fairness");
    } else if (r.place === 0) {
      title.textContent = t("shop.room.title");
      place.textContent = "";
      ahead.textContent = now < opens ? t("shop.room.opens_in", { time: duration(opens - now) }) : r.failed || t("shop.room.taking");
      wait.textContent = "";
      note.textContent = t("shop.room.fairness");
    } else if (!r.provisional && r.place <= r.through) {
      title.textContent = t("shop.room.your_turn");
      place.textContent = t("shop.room.place", { place: r.place });
      ahead.textContent = r.token ? t("shop.room.buy_now") : t("shop.room.fetching");
      wait.textContent = "";
      note.textContent = "";
    } else if (r.provisional && now < start) {
      // Places are drawn at the start: any figure now would be a guess.
      title.textContent = t("shop.room.in_queue");
      place.textContent = t("shop.room.drawn_at_start");
      ahead.textContent = t("shop.room.so_far", { n: r.size, count: number(r.size) });
      wait.textContent = t("shop.list.starts_in", { time: duration(start - now) });
      note.textContent = t("shop.room.random_then");
    } else {
      const secs = left / r.rate + (now < start ? (start - now) / 1000 : 0);
      const about = r.provisional && now >= start;
      const n = Math.max(0, left - 1);
      title.textContent = t("shop.room.in_queue");
      place.textContent = t(about ? "shop.room.place_about_of" : "shop.room.place_of", { place: est.place, size: r.size });
      ahead.textContent = t(about ? "shop.room.ahead_about" : "shop.room.ahead", { n, count: n });
      wait.textContent = t("shop.room.wait", { time: duration(secs * 1000) });
      note.textContent = now < start ? t("shop.room.random_then")
        : t("shop.room.rate", { n: r.rate, count: number(r.rate) });
    }
  };
  r.box = el("div", { class: "room", id: "room" }, title, place, ahead, wait, note, join);
  return r;
}

// estimatePlace is where a place drawn before the start (place among
// earlyAtJoin then) is expected to be once earlyNow have drawn: each
// later draw lands ahead of it with the chance place / earlyAtJoin. The
// margin (three standard deviations and 2 s of admission) is how early to
// read the true place.
function estimatePlace(place, earlyAtJoin, earlyNow, rate) {
  if (!earlyAtJoin) return { place, margin: 0 };
  const later = Math.max(0, earlyNow - earlyAtJoin), f = Math.min(1, place / earlyAtJoin);
  return { place: Math.round(place + later * f), margin: 3 * Math.sqrt(later * f * (1 - f)) + 2 * rate };
}

async function ordersView() {
  const v = pg.begin();
  nav("orders");
  let list, w = null;
  try {
    [list, w] = await Promise.all([api("GET", "/api/orders").then((r) => r.orders), readWallet().catch(() => null)]);
  } catch (e) {
    if (e.code === Code.Unauthenticated) return signInView(() => route());
    return v.show(el("p", { class: "result bad" }, e.message));
  }
  if (!list.length) return v.show(el("h1", {}, t("shop.orders.title")), el("p", { class: "empty" }, t("shop.orders.empty")));
  const purse = el("div", { class: "muted", id: "pay-wallet" });
  if (w) showPurse(purse, w);
  // A refused payment is told above the table, naming its order.
  const note = el("div", { id: "pay-note" });
  const rows = list.map((o) => {
    const badge = el("span", { class: `badge ${o.status}` });
    const left = el("span", { class: "muted" });
    const pay = el("button", { class: "primary small", "data-pay": o.order_id }, t("shop.orders.pay"));
    const cell = el("td", {});
    const paint = () => {
      badge.className = `badge ${o.status}`;
      badge.textContent = t(`shop.orders.status.${o.status}`);
      badge.title = o.status === OrderStatus.Refunded && o.refunded_at ? t("shop.orders.refunded_at", { time: localTime(o.refunded_at) }) : "";
      const ms = Date.parse(o.expires_at) - serverNow();
      const payable = o.status === OrderStatus.Pending && ms > 0;
      left.textContent = payable ? " " + t("shop.orders.time_left", { time: duration(ms) }) : "";
      cell.replaceChildren(...(payable ? [pay, left] : []));
    };
    pay.onclick = async () => {
      pay.disabled = true;
      const { paid, error } = await payOrder(o.order_id, o.amount_cents, note, purse);
      if (paid) {
        Object.assign(o, paid);
        readWallet().then((w) => showPurse(purse, w), () => {});
      } else if (error.code === Code.OrderCancelled) {
        o.status = OrderStatus.Cancelled;
      } else if (error.code === Code.OrderRefunded) {
        o.status = OrderStatus.Refunded;
      } else if (error.code === Code.InsufficientFunds) {
        note.querySelector(".title")?.append(" ", ...tx("shop.orders.for_order", { order: orderRef(o.order_id) }));
      }
      pay.disabled = false;
      paint();
    };
    v.keep(ticker(paint, 1000));
    return el("tr", { "data-order": o.order_id },
      el("td", {}, el("a", { href: `#/sales/${o.sale_id}` }, o.sale_name ? userText(o.sale_name) : t("shop.orders.sale", { id: o.sale_id })),
        o.item ? el("div", { class: "muted small" }, userText(o.item)) : null),
      el("td", {}, orderRef(o.order_id)),
      el("td", {}, number(o.qty)), el("td", {}, money(o.amount_cents)), el("td", {}, badge),
      el("td", { class: "hide-narrow" }, localTime(o.created_at)), cell);
  });
  v.show(el("h1", {}, t("shop.orders.title")), purse, note, el("div", { class: "table-wrap", style: "margin-top:.6rem" }, cards(el("table", { id: "orders" },
    el("thead", {}, el("tr", {}, ["sale", "order", "qty", "amount", "status", "placed", ""].map((h) => el("th", {}, h && t(`shop.orders.col.${h}`))))),
    el("tbody", {}, rows)))));
}

// The last top-up started here (sessionStorage): its id, amount, page at
// the provider, and the order it is for, if any; the wallet tells how it
// went when the shopper comes back from the provider.
const lastTopupKey = "seckill.topup";
function lastTopup() {
  try { return JSON.parse(sessionStorage.getItem(lastTopupKey)) || null; } catch (e) { return null; }
}

// walletView shows the balance, the top-up form (filled in with the
// amount an order lacks, when one sent the shopper here) and the
// statement. A top-up pays at the provider's page and comes back here.
async function walletView(params) {
  const v = pg.begin();
  nav("wallet");
  let w;
  try {
    w = await readWallet();
  } catch (e) {
    if (e.code === Code.Unauthenticated) return signInView(() => route());
    return v.show(el("p", { class: "result bad" }, e.message));
  }
  const account = `wallet:${me.user_id}`;
  const balance = el("div", { class: "n", id: "wallet-balance" });
  const held = el("div", { class: "muted", id: "wallet-held" });
  const paintBalance = () => {
    balance.textContent = money(w.balance_cents);
    held.textContent = w.held_cents > 0 ? t("shop.wallet.held", { amount: money(w.held_cents) }) : "";
  };
  paintBalance();

  // The top-up form: the amount in units, sent as integer cents; one
  // request id per intent, so a retry of the same amount is the same top-up.
  const wanted = Number(params.get("amount")) || 0;
  const forOrder = params.get("order") || "";
  const amount = el("input", { id: "topup-amount", name: "amount", inputmode: "decimal", autocomplete: "off", required: true,
    placeholder: t("shop.wallet.amount_example", { amount: toUnits(2000) }), value: wanted > 0 ? toUnits(wanted) : null });
  const err = el("p", { class: "err", id: "topup-error", role: "alert" });
  const submit = el("button", { class: "primary", type: "submit", id: "topup-submit" }, t("shop.topup"));
  let intent = null; // {cents, id}
  const onsubmit = async (ev) => {
    ev.preventDefault();
    err.textContent = "";
    const cents = parseUnits(amount.value);
    if (cents === null || cents < 1) {
      err.textContent = t("shop.wallet.bad_amount", { currency: currentCurrency(), a: toUnits(2000), b: toUnits(1050) });
      amount.classList.add("invalid");
      return;
    }
    amount.classList.remove("invalid");
    if (!intent || intent.cents !== cents) intent = { cents, id: requestID() };
    submit.disabled = true;
    try {
      const t = await api("POST", "/api/wallet/topups", { amount_cents: cents, request_id: intent.id });
      const url = new URL(t.checkout_url, location.href);
      if (url.protocol !== "https:" && url.protocol !== "http:") throw new Error(t("shop.wallet.bad_page"));
      sessionStorage.setItem(lastTopupKey, JSON.stringify({ id: t.topup_id, amount: t.amount_cents, url: url.href, order: forOrder }));
      location.assign(url.href);
    } catch (e) {
      err.textContent = e.fields && e.fields.length ? e.fields.map((f) => f.message).join("; ") : e.message;
      submit.disabled = false;
    }
  };
  const form = el("form", { class: "card stack", id: "topup-form", onsubmit, novalidate: true },
    el("h2", { style: "margin:0" }, t("shop.topup")),
    forOrder && wanted > 0 ? el("p", { class: "result warn", id: "topup-for" },
      tx("shop.wallet.for_order", { order: orderRef(forOrder), amount: money(wanted) })) : null,
    el("label", {}, t("shop.wallet.amount", { currency: currentCurrency() }), amount), err, submit,
    el("p", { class: "muted", style: "margin:0" }, t("shop.wallet.how")));

  // How the last top-up went, asked again while the provider has not said.
  const last = lastTopup();
  const status = el("div", { id: "topup-status" });
  const st = statement(account, (before) =>
    api("GET", `/api/wallet/transfers?limit=20${before ? `&before_id=${encodeURIComponent(before)}` : ""}`));
  const behind = el("p", { class: "muted", id: "statement-note", hidden: true }, t("common.statement.behind"));
  let topup = null;
  const showTopup = async () => {
    if (!topup || topup.status === TopupStatus.Pending) {
      try { topup = await api("GET", `/api/wallet/topups/${encodeURIComponent(last.id)}`); } catch (e) { return; }
    }
    const what = money(topup.amount_cents);
    // Told once: the next visit of the wallet has no news of it.
    if (topup.status !== TopupStatus.Pending) sessionStorage.removeItem(lastTopupKey);
    const payNext = last.order ? el("a", { class: "button primary small", href: "#/orders", id: "pay-order" }, t("shop.wallet.pay_order")) : null;
    status.replaceChildren(topup.status === TopupStatus.Succeeded
      ? el("div", { class: "result good", "data-topup": topup.status }, t("shop.wallet.arrived", { amount: what }), payNext ? " " : null, payNext)
      : topup.status === TopupStatus.Failed
        ? el("div", { class: "result bad", "data-topup": topup.status }, t("shop.wallet.failed", { amount: what }))
        : el("div", { class: "result warn", "data-topup": topup.status }, t("shop.wallet.waiting", { amount: what }), " ",
          el("a", { href: last.url }, t("shop.wallet.back_to_page"))));
  };
  v.show(el("h1", {}, t("shop.wallet.title")), status,
    el("div", { class: "money-top" },
      el("section", { class: "card balance" }, el("div", { class: "l" }, t("shop.wallet.balance")), balance, held,
        el("p", { class: "muted small" }, tx("shop.wallet.shopper_id", { id: el("span", { class: "mono", id: "wallet-user" }, me.user_id) }))),
      form),
    el("h2", {}, t("common.statement.title")), behind, st.box);
  if (wanted > 0) amount.focus();
  // The balance read above is the first; a top-up the provider has not
  // confirmed is asked after often for two minutes, then as the rest.
  let first = w;
  const opened = Date.now();
  keepCurrent(v, async () => {
    w = first || (await readWallet());
    first = null;
    paintBalance();
    return w.balance_cents;
  }, st, behind, async () => {
    if (!last) return false;
    await showTopup();
    return !!topup && topup.status === TopupStatus.Pending && Date.now() - opened < 120000;
  });
}

function route() {
  const h = location.hash.replace(/^#/, "") || "/";
  const m = h.match(/^\/sales\/(\d+)$/);
  if (m) return saleView(Number(m[1]));
  if (h === "/orders") return me ? ordersView() : signInView(() => ordersView());
  const w = h.match(/^\/wallet(?:\?(.*))?$/);
  if (w) return me ? walletView(new URLSearchParams(w[1] || "")) : signInView(() => route());
  if (!me) return signInView(() => route());
  return salesView();
}

// Start: the language, who is signed in, then the page the address names.
// Hash changes route from then on: one made while this starts is in the
// address the first route reads (listening earlier, a route of this start
// arriving late redrew a page the shopper had already used).
(async () => {
  await loadLanguage();
  try {
    identity = await api("GET", "/api/identity");
  } catch (e) { /* the guest form, as before */ }
  try {
    const s = await api("GET", "/api/session");
    if (s.signed_in) {
      signedIn(s);
      await readWallet().catch(() => {}); // the currency of the prices
    }
  } catch (e) {
    me = null;
  }
  renderWho();
  addEventListener("hashchange", route);
  if (location.pathname === "/verify") return verifyView();
  route();
})();
