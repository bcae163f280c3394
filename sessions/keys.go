package sessions

// keys names the Redis keys of the session records under a prefix (the
// deployment's, as for every key; see inventory.Keys for a sale's).
type keys struct{ prefix string }

// signOuts maps each user who signed out to when (unix seconds, as the
// score of a sorted set): tokens issued before are refused.
func (k keys) signOuts() string { return k.prefix + ":signouts" }

// signedOut is the pub/sub channel announcing a sign-out (signOutMessage).
func (k keys) signedOut() string { return k.prefix + ":signed-out" }

// admin is an admin login session.
func (k keys) admin(token string) string { return k.prefix + ":admin:session:" + token }
