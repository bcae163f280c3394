package server

import (
	"bytes"
	"html/template"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/provider"
)

// The test provider's checkout (development and embedded mode): a page
// standing in for Stripe's, whose buttons send the webhook Stripe would,
// signed the same way, through the same handling as the real one.

var testPage = template.Must(template.New("pay").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Test payment</title><link rel="icon" href="data:,">
<style>
body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f4f5f7;color:#1d2430}
main{max-width:26rem;margin:4rem auto;padding:2rem;background:#fff;border-radius:12px;box-shadow:0 2px 12px #0002}
h1{font-size:1.3rem;margin:0 0 .5rem} .amount{font-size:2rem;font-weight:700;margin:1rem 0}
.note{color:#5b6472;font-size:.9rem} form{display:inline} button{font:inherit;padding:.6rem 1.2rem;border-radius:8px;border:0;cursor:pointer}
.pay{background:#1f6feb;color:#fff;margin-right:.5rem} .cancel{background:#e6e8eb;color:#1d2430}
</style></head>
<body><main>
<h1>Test payment provider</h1>
<p class="note">This page stands in for the payment provider's checkout in development. No money moves: paying here sends the provider's signed webhook to the shop.</p>
<p class="amount">{{.Amount}} {{.Currency}}</p>
{{if eq .Status "pending"}}
<form method="post" action="{{.Path}}/pay"><button class="pay" type="submit">Pay</button></form>
<form method="post" action="{{.Path}}/cancel"><button class="cancel" type="submit">Cancel</button></form>
{{else}}<p>This top-up is {{.Status}}. <a href="/#/wallet">Back to the shop</a></p>{{end}}
</main></body></html>`))

func (s *Server) testProviderRoutes(e *gin.Engine) {
	e.GET(provider.PagePath+":id", pageHeaders, s.testPayPage)
	e.POST(provider.PagePath+":id/pay", s.sameOrigin, s.testPay(true))
	e.POST(provider.PagePath+":id/cancel", s.sameOrigin, s.testPay(false))
}

// testPayPage answers GET /pay/test/{id}: the test checkout of a top-up.
func (s *Server) testPayPage(c *gin.Context) {
	t, err := s.Topups.TestPage(c.Request.Context(), c.Param("id"))
	if err != nil {
		abort(c, err)
		return
	}
	var b bytes.Buffer
	_ = testPage.Execute(&b, map[string]any{
		"Amount": formatCents(t.Amount), "Currency": t.Currency, "Status": string(t.Status), "Path": provider.PagePath + t.ID,
	})
	c.Data(http.StatusOK, "text/html; charset=utf-8", b.Bytes())
}

// testPay answers the test checkout's buttons: the provider's webhook,
// then back to the shop's wallet.
func (s *Server) testPay(paid bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		if _, err := s.Topups.TestPay(c.Request.Context(), c.Param("id"), paid); err != nil {
			abort(c, err)
			return
		}
		c.Redirect(http.StatusSeeOther, "/#/wallet")
	}
}

// formatCents writes cents as units with two decimals (the test page's
// currencies all have two).
func formatCents(n int64) string {
	sign := ""
	if n < 0 {
		sign, n = "-", -n
	}
	cents := strconv.FormatInt(n%100, 10)
	if len(cents) == 1 {
		cents = "0" + cents
	}
	return sign + strconv.FormatInt(n/100, 10) + "." + cents
}
