package server

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/audit"
	"github.com/seckill/seckill/identity"
)

// auditJSON is an audit row as the API shows it.
type auditJSON struct {
	ID     int64           `json:"id"`
	At     time.Time       `json:"at"`
	Actor  string          `json:"actor"`
	Role   string          `json:"role"`
	Action string          `json:"action"`
	SaleID int64           `json:"sale_id,omitempty"`
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
	IP     string          `json:"ip"`
}

// auditFilter reads GET /admin/api/audit's query: sale_id, actor, action,
// since and until (RFC 3339), before_id and limit (default
// audit.DefaultPage).
func auditFilter(c *gin.Context) (seckill.AuditFilter, error) {
	var f seckill.AuditFilter
	var errs []seckill.FieldError
	for _, p := range []struct {
		name string
		dst  *int64
	}{{"sale_id", &f.SaleID}, {"before_id", &f.BeforeID}} {
		if v := c.Query(p.name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 {
				errs = append(errs, seckill.FieldError{Field: p.name, Message: "must be a positive integer"})
			}
			*p.dst = n
		}
	}
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > audit.MaxPage {
			errs = append(errs, seckill.FieldError{Field: "limit", Message: "must be 1 to " + strconv.Itoa(audit.MaxPage)})
		}
		f.Limit = n
	}
	if f.Limit == 0 {
		f.Limit = audit.DefaultPage
	}
	f.Actor = c.Query("actor")
	if len(f.Actor) > identity.MaxEmail {
		errs = append(errs, seckill.FieldError{Field: "actor", Message: fmt.Sprintf("must be at most %d characters", identity.MaxEmail)})
	}
	f.Action = c.Query("action")
	if len(f.Action) > 32 || !auditAction.MatchString(f.Action) {
		errs = append(errs, seckill.FieldError{Field: "action", Message: "must be an action's name, such as sale.patch"})
	}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := c.Query(p.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				errs = append(errs, seckill.FieldError{Field: p.name, Message: "must be a time such as 2026-12-03T18:00:00Z"})
			}
			*p.dst = t
		}
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since) {
		errs = append(errs, seckill.FieldError{Field: "until", Message: "must be after since"})
	}
	if len(errs) > 0 {
		return f, seckill.Invalid(errs...)
	}
	return f, nil
}

// auditAction is what an action filter may be: empty, or a name like the
// audit log's (sale.patch, login.failed), at most its column's 32
// characters.
var auditAction = regexp.MustCompile(`^([a-z_]+(\.[a-z_]+)*)?$`)

// AuditLog reads the audit log for the actor of ctx (audit.Service: which
// rows and which addresses a reader sees is decided there, once for every
// view).
type AuditLog interface {
	Log(ctx context.Context, f seckill.AuditFilter) ([]seckill.AuditEntry, error)
}

// auditLog answers GET /admin/api/audit: the rows newest first, and the
// before_id of the next page; with format=csv, the page as CSV.
func (s *Server) auditLog(c *gin.Context) {
	f, err := auditFilter(c)
	if err != nil {
		abort(c, err)
		return
	}
	rows, err := s.Audit.Log(c.Request.Context(), f)
	if err != nil {
		abort(c, err)
		return
	}
	if c.Query("format") == "csv" {
		writeAuditCSV(c, rows)
		return
	}
	out := make([]auditJSON, len(rows))
	for i, r := range rows {
		out[i] = auditJSON{ID: r.ID, At: r.At.UTC(), Actor: r.Actor, Role: r.Role, Action: r.Action, SaleID: r.SaleID,
			Before: r.Before, After: r.After, IP: r.IP}
	}
	var next any
	if len(rows) == f.Limit { // a full page: there may be more
		next = rows[len(rows)-1].ID
	}
	c.JSON(http.StatusOK, gin.H{"entries": out, "next_before_id": next})
}

// writeAuditCSV writes rows as CSV, a header line first. A field that a
// spreadsheet would run as a formula is prefixed with a quote.
func writeAuditCSV(c *gin.Context, rows []seckill.AuditEntry) {
	c.Header("Content-Type", "text/csv; charset=utf-8")
	c.Header("Content-Disposition", `attachment; filename="seckill-audit.csv"`)
	w := csv.NewWriter(c.Writer)
	_ = w.Write([]string{"id", "at", "actor", "role", "action", "sale_id", "before", "after", "ip"})
	for _, r := range rows {
		sale := ""
		if r.SaleID > 0 {
			sale = strconv.FormatInt(r.SaleID, 10)
		}
		_ = w.Write([]string{strconv.FormatInt(r.ID, 10), r.At.UTC().Format(time.RFC3339Nano), cell(r.Actor), r.Role, r.Action,
			sale, cell(string(r.Before)), cell(string(r.After)), r.IP})
	}
	w.Flush()
}

func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
