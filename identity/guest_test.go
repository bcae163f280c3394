package identity_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/identity"
)

// TestGuests: a guest is a new user at every sign-in, under the name
// given (trimmed), never verified; a name a page could not show is
// refused as invalid.
func TestGuests(t *testing.T) {
	var g identity.Guests
	a, err := g.SignIn("  alice ")
	if err != nil {
		t.Fatal(err)
	}
	b, err := g.SignIn("alice")
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != "alice" || a.Verified || !strings.HasPrefix(a.ID, "u_") || len(a.ID) != 2+26 || a.ID == b.ID {
		t.Errorf("guests %+v and %+v", a, b)
	}
	if identity.IsAccount(a.ID) {
		t.Errorf("a guest %s is taken for an account", a.ID)
	}
	for name, want := range map[string]string{
		"":                        "Name must be 1 to 64 characters.",
		"   ":                     "Name must be 1 to 64 characters.",
		strings.Repeat("x", 65):   "Name must be 1 to 64 characters.",
		"bob\u202Efdp.exe":        "Name must not contain control, line-break or text-direction characters.",
		"line\nbreak":             "Name must not contain control, line-break or text-direction characters.",
		string([]byte{0xff, 'a'}): "Name must be valid UTF-8.",
	} {
		_, err := g.SignIn(name)
		var e *seckill.Error
		if !errors.As(err, &e) || e.Code != seckill.CodeInvalid || e.Message != want {
			t.Errorf("name %q: %v, want invalid_request %q", name, err, want)
		}
	}
}
