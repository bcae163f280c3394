package identity

import (
	"strings"

	"github.com/oklog/ulid/v2"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/sessions"
)

// guestIDStart begins a guest's user id.
const guestIDStart = "u_"

// Guests sign anyone in under a display name (API.md, guest): a new user
// at every sign-in, never verified. Nothing is kept: the user is its
// session.
type Guests struct{}

// SignIn returns a new guest shopper named name (trimmed of surrounding
// white space) with a user id of its own ("u_" and a ULID), or
// invalid_request for a name that is empty, too long or holds control or
// bidi-override characters.
func (Guests) SignIn(name string) (sessions.User, error) {
	name = strings.TrimSpace(name)
	if msg := seckill.CheckText(name, seckill.MaxShopperName); msg != "" {
		return sessions.User{}, seckill.Errorf(seckill.CodeInvalid, "Name %s.", msg)
	}
	return sessions.User{ID: guestIDStart + ulid.Make().String(), Name: name}, nil
}
