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

// Merchant is a merchant's account in the admin panel: its own sales
// only. The operator (the configured admin password and token) manages
// them.
type Merchant struct {
	ID           int64
	Email        string
	Name         string
	PasswordHash string
	// TOTPSecret is the second factor's secret (base32), TOTPConfirmed
	// whether its enrolment was confirmed with a code (only then is it
	// asked at login); TOTPStep the last time step a code was used at, so
	// a code works once.
	TOTPSecret    string
	TOTPConfirmed bool
	TOTPStep      int64
	Disabled      bool
	// SessionsAfter (unix ms): sessions opened until then are refused;
	// disabling sets it, so enabling again brings none back.
	SessionsAfter int64
	// PayoutAccount is where its payouts go at the provider (a Stripe
	// connected account, acct_…); "" until the operator sets it.
	PayoutAccount string
	CreatedAt     time.Time
}

// ErrNoMerchant is an id or email no merchant has.
var ErrNoMerchant = Errorf(CodeNotFound, "No such merchant.")

// KeptSession is a session record kept in the ledger's database where
// Redis dies with the process (embedded mode): an admin session or a
// shopper's sign-out, put back into Redis at start (package sessions).
type KeptSession struct {
	Name    string
	Value   string
	Expires time.Time
}
