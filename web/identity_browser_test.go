package web_test

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	cdpwa "github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"

	"github.com/seckill/seckill/identity"
	"github.com/seckill/seckill/identity/identitytest"
	"github.com/seckill/seckill/server"
	"github.com/seckill/seckill/system/servertest"
)

// identitySite serves a deployment offering the provider's sign-in and
// built-in accounts at http://localhost:<port> (a passkey's relying party
// is a host name, never an IP), its mail caught by the mailbox.
func identitySite(t *testing.T) (*servertest.Env, *server.Server, string, *identitytest.Provider, *identitytest.Mailbox) {
	t.Helper()
	p := identitytest.NewProvider(t)
	mb := identitytest.NewMailbox(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("http://localhost:%d", ln.Addr().(*net.TCPAddr).Port)
	env := servertest.New(t, "SECKILL_IDENTITY=oidc,accounts", "SECKILL_OIDC_ISSUER="+p.Issuer(),
		"SECKILL_OIDC_CLIENT_ID="+p.ClientID(), "SECKILL_OIDC_CLIENT_SECRET="+p.ClientSecret(),
		"SECKILL_SMTP_ADDR="+mb.Addr, "SECKILL_PUBLIC_URL="+base, "SECKILL_PUBLIC_ORIGINS="+base)
	srv := env.Server(t, nil)
	site := httptest.NewUnstartedServer(srv.Handler())
	site.Listener.Close()
	site.Listener = ln
	site.Start()
	t.Cleanup(site.Close)
	return env, srv, base, p, mb
}

// TestProviderSignInInBrowser: the shopper clicks the shop's sign-in,
// signs in at the provider, comes back signed in to the sale page and buys.
func TestProviderSignInInBrowser(t *testing.T) {
	env, srv, base, p, _ := identitySite(t)
	env.StartPipeline(t) // my orders lists the ledger's
	sale := servertest.MustSale(t, srv, servertest.SaleSpec{Total: 3, Limit: 1, PriceCents: 12900})
	p.QueueUser("shopper-7", "grace@example.com", true)
	dir := artifacts(t)
	b := browser(t)
	shopper := newTab(t, b, "oidc-shopper", base)
	shopper.do("sign-in page", chromedp.Navigate(base+"/#/orders"), chromedp.WaitVisible(chromedp.CSS("#signin-oidc")))
	shopper.screenshot(dir, "signin-choices.png")
	shopper.do("sign in at the provider", chromedp.Click(chromedp.CSS("#signin-oidc")))
	shopper.waitThroughNavigation("back on my orders, signed in", `location.hash === "#/orders" && document.querySelector("#who-name")?.textContent === "shopper-7"`, 10*time.Second)
	shopper.do("open sale", chromedp.Navigate(fmt.Sprintf("%s/#/sales/%d", base, sale.ID)), chromedp.WaitVisible(chromedp.CSS("#buy")))
	shopper.waitJS("buy enabled", `!document.querySelector("#buy").disabled`, 10*time.Second)
	shopper.do("buy", chromedp.Click(chromedp.CSS("#buy")))
	shopper.waitJS("bought", `document.querySelector("#result-title")?.textContent === "You got it!"`, 20*time.Second)
	shopper.screenshot(dir, "oidc-bought.png")
	// My orders lists the ledger's: once the worker wrote the order.
	user := identity.UserID(p.Issuer(), "shopper-7")
	servertest.WaitFor(t, 30*time.Second, "the order in the ledger", func() (bool, string) {
		os, err := env.Ledger.UserOrders(t.Context(), user, 10)
		return err == nil && len(os) == 1, fmt.Sprintf("%d orders, %v", len(os), err)
	})
	shopper.do("my orders", chromedp.Navigate(base+"/#/orders"), chromedp.WaitVisible(chromedp.CSS("[data-order]")))
	if got := shopper.text("[data-order] td"); !strings.HasPrefix(got, "Test sale") {
		t.Errorf("my orders names the order's sale as %q, want the sale's name", got)
	}
	shopper.screenshot(dir, "oidc-orders.png")
	orders, err := env.Inventory.Buyers(t.Context(), sale.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := identity.UserID(p.Issuer(), "shopper-7"); orders[want] != 1 {
		t.Errorf("units by buyer %v, want 1 for %s", orders, want)
	}
	shopper.checkConsole()
}

// TestPasskeyInBrowser: a shopper opens an account, confirms the email by
// the mail's link, registers a passkey (a virtual authenticator in
// Chromium), signs out, signs in with the passkey alone and buys on a
// sale for verified shoppers only.
func TestPasskeyInBrowser(t *testing.T) {
	_, srv, base, _, mb := identitySite(t)
	sale := servertest.MustSale(t, srv, servertest.SaleSpec{Total: 3, Limit: 1, VerifiedOnly: true})
	dir := artifacts(t)
	b := browser(t)
	shopper := newTab(t, b, "passkey-shopper", base)
	if _, err := chromedp.Call(shopper.ctx, cdpwa.Enable, cdpwa.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(shopper.ctx, cdpwa.AddVirtualAuthenticator, cdpwa.AddVirtualAuthenticatorParams{
		Options: &cdpwa.VirtualAuthenticatorOptions{
			Protocol: cdpwa.AuthenticatorProtocolCtap2, Ctap2version: cdpwa.Ctap2versionCtap21,
			Transport: cdpwa.AuthenticatorTransportInternal, HasResidentKey: true, HasUserVerification: true,
			IsUserVerified: true, AutomaticPresenceSimulation: true,
		},
	}); err != nil {
		t.Fatal(err)
	}
	shopper.do("sign up",
		chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#email")),
		chromedp.SendKeys(chromedp.CSS("#email"), "ivy@example.com"),
		chromedp.SendKeys(chromedp.CSS("#password"), "a long passphrase"),
		chromedp.Click(chromedp.CSS("#signup")), chromedp.WaitVisible(chromedp.CSS("#resend")))
	shopper.screenshot(dir, "account-unverified.png")
	link := mb.Token(t, "ivy@example.com", 1)
	shopper.do("verify", chromedp.Navigate(base+"/verify?token="+link))
	shopper.waitJS("verified", `document.querySelector("#verify h1")?.textContent === "Email confirmed" && document.querySelector(".badge.verified")`, 10*time.Second)
	shopper.screenshot(dir, "account-verified.png")
	shopper.do("to the sales", chromedp.Click(chromedp.CSS("#verify a.button")))
	shopper.waitJS("the sales", `document.querySelector("#verify") === null && location.hash === "#/"`, 10*time.Second)
	shopper.do("add a passkey", chromedp.Click(chromedp.CSS("#add-passkey")))
	shopper.waitJS("passkey added", `document.querySelector("#add-passkey")?.textContent === "Passkey added"`, 10*time.Second)
	shopper.do("sign out", chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#signin-passkey")))
	shopper.do("sign in with the passkey", chromedp.Click(chromedp.CSS("#signin-passkey")))
	shopper.waitJS("signed in", `document.querySelector("#who-name")?.textContent === "ivy" && document.querySelector(".badge.verified")`, 10*time.Second)
	shopper.do("open sale", chromedp.Navigate(fmt.Sprintf("%s/#/sales/%d", base, sale.ID)), chromedp.WaitVisible(chromedp.CSS("#verified-only")))
	shopper.waitJS("buy enabled", `!document.querySelector("#buy").disabled`, 10*time.Second)
	shopper.do("buy", chromedp.Click(chromedp.CSS("#buy")))
	shopper.waitJS("bought", `document.querySelector("#result-title")?.textContent === "You got it!"`, 20*time.Second)
	shopper.screenshot(dir, "passkey-bought.png")
	shopper.checkConsole()
}

// waitThroughNavigation waits until the expression is truthy while the
// tab navigates (through the provider and back): each try runs in the
// page then current, a try the navigation cut short is tried again.
func (tb *tab) waitThroughNavigation(what, expr string, limit time.Duration) {
	tb.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(tb.ctx, time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			tb.t.Fatalf("%s: %s: not within %s (last error %v)\n%s", tb.name, what, limit, err, tb.describe())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
