package seckill

import "time"

// Account is a built-in shopper account: for a shop without its own
// OpenID Connect provider. Its id is the user id ("a_…"); its email is kept
// normalised (NormalizeEmail) and is unique.
type Account struct {
	ID    string
	Email string
	// PasswordHash is the password's argon2id hash in the PHC string
	// format ($argon2id$v=19$m=…,t=…,p=…$salt$hash).
	PasswordHash string
	// VerifiedAt is when the email was confirmed (nil: not yet).
	VerifiedAt *time.Time
	CreatedAt  time.Time
}

// Verified reports whether the account's email was confirmed.
func (a Account) Verified() bool { return a.VerifiedAt != nil }

// ErrNoAccount is an email or id no account has.
var ErrNoAccount = Errorf(CodeUnauthenticated, "No such account.")

// ErrVerifyLink is a verification token unknown, expired or spent.
var ErrVerifyLink = Errorf(CodeInvalid, "This verification link is expired, used already or not valid: ask for a new one.")
