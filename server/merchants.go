package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/merchants"
)

// Merchants are the admin panel's merchants (merchants.Service): managed
// by the operator and enrolling their second factor here; Login and
// Active check a merchant's login and session (auth.go).
type Merchants interface {
	Create(ctx context.Context, email, name, password string) (seckill.Merchant, error)
	List(ctx context.Context) ([]seckill.Merchant, error)
	SetDisabled(ctx context.Context, id int64, disabled bool) (seckill.Merchant, error)
	ResetTOTP(ctx context.Context, id int64) (seckill.Merchant, error)
	EnrolTOTP(ctx context.Context) (secret, url string, err error)
	ConfirmTOTP(ctx context.Context, code string) error
	SignIn(ctx context.Context, c merchants.Credentials) (merchants.Session, error)
	Active(ctx context.Context, id, opened int64) (seckill.Merchant, error)
	SetPayoutAccount(ctx context.Context, id int64, account string) (seckill.Merchant, error)
}

// merchantJSON is a merchant as the API shows it.
type merchantJSON struct {
	ID       int64  `json:"id"`
	Email    string `json:"email"`
	Name     string `json:"name"`
	Role     string `json:"role"`
	Disabled bool   `json:"disabled"`
	TOTP     bool   `json:"totp"`
	// PayoutAccount is where its payouts go at the provider ("" none yet).
	PayoutAccount string    `json:"payout_account"`
	CreatedAt     time.Time `json:"created_at"`
}

func merchantView(m seckill.Merchant) merchantJSON {
	return merchantJSON{ID: m.ID, Email: m.Email, Name: m.Name, Role: seckill.RoleMerchant, Disabled: m.Disabled,
		TOTP: m.TOTPConfirmed, PayoutAccount: m.PayoutAccount, CreatedAt: m.CreatedAt.UTC()}
}

type merchantRequest struct {
	Email    string `json:"email"`
	Name     string `json:"name"`
	Password string `json:"password"`
}

// createMerchant opens a merchant account (the operator only).
func (s *Server) createMerchant(c *gin.Context) {
	var req merchantRequest
	if err := decode(c, &req); err != nil {
		abort(c, err)
		return
	}
	m, err := s.Merchants.Create(c.Request.Context(), req.Email, req.Name, req.Password)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusCreated, merchantView(m))
}

// listMerchants lists the merchants (the operator only).
func (s *Server) listMerchants(c *gin.Context) {
	ms, err := s.Merchants.List(c.Request.Context())
	if err != nil {
		abort(c, err)
		return
	}
	out := make([]merchantJSON, len(ms))
	for i, m := range ms {
		out[i] = merchantView(m)
	}
	c.JSON(http.StatusOK, gin.H{"merchants": out})
}

var errMerchantID = invalid("Merchant id must be a positive integer.")

// setMerchantDisabled disables or enables a merchant (the operator only).
func (s *Server) setMerchantDisabled(disabled bool) gin.HandlerFunc {
	return s.onMerchant(func(ctx context.Context, id int64) (seckill.Merchant, error) {
		return s.Merchants.SetDisabled(ctx, id, disabled)
	})
}

// resetTOTP removes a merchant's second factor (the operator only).
func (s *Server) resetTOTP(c *gin.Context) { s.onMerchant(s.Merchants.ResetTOTP)(c) }

type payoutAccountRequest struct {
	Account string `json:"account"`
}

// setPayoutAccount sets where a merchant's payouts go at the provider
// (the operator only).
func (s *Server) setPayoutAccount(c *gin.Context) {
	var req payoutAccountRequest
	if err := decode(c, &req); err != nil {
		abort(c, err)
		return
	}
	s.onMerchant(func(ctx context.Context, id int64) (seckill.Merchant, error) {
		return s.Merchants.SetPayoutAccount(ctx, id, req.Account)
	})(c)
}

// onMerchant answers a change of the merchant of the :id parameter.
func (s *Server) onMerchant(change func(context.Context, int64) (seckill.Merchant, error)) gin.HandlerFunc {
	return func(c *gin.Context) {
		id, err := strconv.ParseInt(c.Param("id"), 10, 64)
		if err != nil || id <= 0 {
			abort(c, errMerchantID)
			return
		}
		m, err := change(c.Request.Context(), id)
		if err != nil {
			abort(c, err)
			return
		}
		c.JSON(http.StatusOK, merchantView(m))
	}
}

// enrolTOTP starts the signed-in merchant's second factor:
// {"secret", "otpauth_url"} for an authenticator app.
func (s *Server) enrolTOTP(c *gin.Context) {
	secret, url, err := s.Merchants.EnrolTOTP(c.Request.Context())
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"secret": secret, "otpauth_url": url})
}

type codeRequest struct {
	Code string `json:"code"`
}

// confirmTOTP confirms the enrolment with a code of the app.
func (s *Server) confirmTOTP(c *gin.Context) {
	var req codeRequest
	if err := decode(c, &req); err != nil {
		abort(c, err)
		return
	}
	if err := s.Merchants.ConfirmTOTP(c.Request.Context(), req.Code); err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"totp": true})
}
