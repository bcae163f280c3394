package identity

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/seckill/seckill"
	"github.com/seckill/seckill/sessions"
)

// PasskeyStore keeps the accounts' passkeys (orders.Store).
type PasskeyStore interface {
	Account(ctx context.Context, id string) (seckill.Account, error)
	AddPasskey(ctx context.Context, account, id string, credential []byte, now time.Time) error
	Passkeys(ctx context.Context, account string) ([][]byte, error)
	UpdatePasskey(ctx context.Context, account, id string, credential []byte) error
}

// Passkeys are WebAuthn credentials of built-in accounts: registered by a
// signed-in account, then enough to sign in alone (discoverable, with
// user verification on the device).
type Passkeys struct {
	wa      *webauthn.WebAuthn
	store   PasskeyStore
	pending *Pending
	now     func() time.Time
}

// ceremonyTTL is how long a passkey prompt may stay open.
const ceremonyTTL = 5 * time.Minute

// NewPasskeys returns the passkeys of the deployment at publicURL (its
// host is the relying party id, so a passkey works on every server of it).
func NewPasskeys(publicURL string, store PasskeyStore, pending *Pending, now func() time.Time) (*Passkeys, error) {
	u, err := url.Parse(publicURL)
	if err != nil || u.Hostname() == "" {
		return nil, fmt.Errorf("identity: passkeys need the deployment's public URL, not %q", publicURL)
	}
	wa, err := webauthn.New(&webauthn.Config{
		RPID: u.Hostname(), RPDisplayName: "Seckill", RPOrigins: []string{u.Scheme + "://" + u.Host},
		AuthenticatorSelection: protocol.AuthenticatorSelection{
			ResidentKey: protocol.ResidentKeyRequirementRequired, UserVerification: protocol.VerificationRequired,
		},
		Timeouts: webauthn.TimeoutsConfig{
			Login:        webauthn.TimeoutConfig{Enforce: true, Timeout: ceremonyTTL},
			Registration: webauthn.TimeoutConfig{Enforce: true, Timeout: ceremonyTTL},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("identity: passkeys for %s: %w", publicURL, err)
	}
	return &Passkeys{wa: wa, store: store, pending: pending, now: now}, nil
}

// passkeyUser is an account as go-webauthn sees it; its user handle is the
// account id.
type passkeyUser struct {
	acc   seckill.Account
	creds []webauthn.Credential
}

func (u passkeyUser) WebAuthnID() []byte                         { return []byte(u.acc.ID) }
func (u passkeyUser) WebAuthnName() string                       { return u.acc.Email }
func (u passkeyUser) WebAuthnDisplayName() string                { return u.acc.Email }
func (u passkeyUser) WebAuthnCredentials() []webauthn.Credential { return u.creds }

func (p *Passkeys) user(ctx context.Context, id string) (passkeyUser, error) {
	acc, err := p.store.Account(ctx, id)
	if err != nil {
		return passkeyUser{}, err
	}
	rows, err := p.store.Passkeys(ctx, id)
	if err != nil {
		return passkeyUser{}, err
	}
	u := passkeyUser{acc: acc, creds: make([]webauthn.Credential, 0, len(rows))}
	for _, r := range rows {
		var c webauthn.Credential
		if err := json.Unmarshal(r, &c); err != nil {
			return passkeyUser{}, fmt.Errorf("identity: a passkey of %s: %w", id, err)
		}
		u.creds = append(u.creds, c)
	}
	return u, nil
}

// Refusals of a passkey registration: not a built-in account, or one
// whose email is not confirmed yet (else whoever signed up with someone
// else's address would keep a way in once its owner confirms it).
var (
	ErrNotAccount  = seckill.Errorf(seckill.CodeForbidden, "Passkeys are for built-in accounts: sign in with your email and password first.")
	errNotVerified = seckill.Errorf(seckill.CodeForbidden, "Confirm your email first (the link we sent), then add a passkey.")
)

// errPasskey is a passkey answer that does not check out.
var errPasskey = seckill.Errorf(seckill.CodeUnauthenticated, "The passkey could not be checked; try again.")

// BeginRegistration starts registering a passkey for a signed-in account:
// the options for navigator.credentials.create and the ceremony's id.
func (p *Passkeys) BeginRegistration(ctx context.Context, userID string) (*protocol.CredentialCreation, string, error) {
	if !IsAccount(userID) {
		return nil, "", ErrNotAccount
	}
	u, err := p.user(ctx, userID)
	if err != nil {
		return nil, "", err
	}
	if !u.acc.Verified() {
		return nil, "", errNotVerified
	}
	creation, sess, err := p.wa.BeginRegistration(u,
		webauthn.WithExclusions(webauthn.Credentials(u.creds).CredentialDescriptors()),
		webauthn.WithResidentKeyRequirement(protocol.ResidentKeyRequirementRequired))
	if err != nil {
		return nil, "", fmt.Errorf("identity: begin passkey registration: %w", err)
	}
	id, err := p.keep(ctx, "register", sess)
	return creation, id, err
}

// FinishRegistration checks the browser's new credential (body, as
// PublicKeyCredential.toJSON writes it) and stores it.
func (p *Passkeys) FinishRegistration(ctx context.Context, userID, ceremony string, body []byte) error {
	sess, err := p.session(ctx, "register", ceremony)
	if err != nil {
		return err
	}
	if !bytes.Equal(sess.UserID, []byte(userID)) {
		return errPasskey
	}
	u, err := p.user(ctx, userID)
	if err != nil {
		return err
	}
	parsed, err := protocol.ParseCredentialCreationResponseBytes(body)
	if err != nil {
		return errPasskey
	}
	cred, err := p.wa.CreateCredential(u, sess, parsed)
	if err != nil {
		return errPasskey
	}
	b, err := json.Marshal(cred)
	if err != nil {
		return err
	}
	return p.store.AddPasskey(ctx, userID, base64.RawURLEncoding.EncodeToString(cred.ID), b, p.now())
}

// BeginLogin starts a sign-in with a passkey alone (the device offers the
// passkeys it has for this deployment).
func (p *Passkeys) BeginLogin(ctx context.Context) (*protocol.CredentialAssertion, string, error) {
	assertion, sess, err := p.wa.BeginDiscoverableLogin(webauthn.WithUserVerification(protocol.VerificationRequired))
	if err != nil {
		return nil, "", fmt.Errorf("identity: begin passkey login: %w", err)
	}
	id, err := p.keep(ctx, "login", sess)
	return assertion, id, err
}

// FinishLogin checks the browser's assertion and returns the account's
// shopper; the passkey's signature counter is stored.
func (p *Passkeys) FinishLogin(ctx context.Context, ceremony string, body []byte) (sessions.User, error) {
	sess, err := p.session(ctx, "login", ceremony)
	if err != nil {
		return sessions.User{}, err
	}
	parsed, err := protocol.ParseCredentialRequestResponseBytes(body)
	if err != nil {
		return sessions.User{}, errPasskey
	}
	var lookupErr error
	wu, cred, err := p.wa.ValidatePasskeyLogin(func(_, handle []byte) (webauthn.User, error) {
		u, err := p.user(ctx, string(handle))
		lookupErr = err
		return u, err
	}, sess, parsed)
	if lookupErr != nil && seckill.CodeOf(lookupErr) == seckill.CodeUnavailable {
		return sessions.User{}, lookupErr
	}
	if err != nil || cred.Authenticator.CloneWarning {
		// A signature counter that went back: the passkey was copied.
		return sessions.User{}, errPasskey
	}
	u := wu.(passkeyUser)
	b, err := json.Marshal(cred)
	if err != nil {
		return sessions.User{}, err
	}
	if err := p.store.UpdatePasskey(ctx, u.acc.ID, base64.RawURLEncoding.EncodeToString(cred.ID), b); err != nil {
		return sessions.User{}, err
	}
	return accountUser(u.acc), nil
}

func (p *Passkeys) keep(ctx context.Context, kind string, sess *webauthn.SessionData) (string, error) {
	b, err := json.Marshal(sess)
	if err != nil {
		return "", err
	}
	id := randomToken()
	return id, p.pending.put(ctx, "passkey-"+kind, id, b, ceremonyTTL)
}

func (p *Passkeys) session(ctx context.Context, kind, id string) (webauthn.SessionData, error) {
	b, err := p.pending.take(ctx, "passkey-"+kind, id)
	if err != nil {
		return webauthn.SessionData{}, err
	}
	var sess webauthn.SessionData
	if err := json.Unmarshal(b, &sess); err != nil {
		return webauthn.SessionData{}, fmt.Errorf("identity: a kept passkey ceremony: %w", err)
	}
	return sess, nil
}
