package seckill

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxShopperName bounds a shopper's display name.
const MaxShopperName = 64

// CheckText reports what is wrong with a name shown to people (a sale's
// name or item, a shopper's name), or "" if nothing: it must be valid
// UTF-8 of 1 to max characters, must not start or end with white space, and
// must not hold control characters, line or paragraph separators, or the
// invisible characters that reorder text (bidi embeddings, overrides,
// isolates and marks): "invoice \u202Efdp.exe" would show as
// "invoice exe.pdf".
func CheckText(s string, max int) string {
	if !utf8.ValidString(s) {
		return "must be valid UTF-8"
	}
	if n := utf8.RuneCountInString(s); n < 1 || n > max {
		return fmt.Sprintf("must be 1 to %d characters", max)
	}
	if strings.TrimSpace(s) != s {
		return "must not start or end with spaces"
	}
	if strings.IndexFunc(s, forbiddenRune) >= 0 {
		return "must not contain control, line-break or text-direction characters"
	}
	return ""
}

// MaxDescriptionLen bounds a sale's description, in characters.
const MaxDescriptionLen = 2000

// CheckDescription is CheckText for a sale's description: it may be empty
// and hold line breaks ("\n" only), up to MaxDescriptionLen characters.
func CheckDescription(s string) string {
	if s == "" {
		return ""
	}
	return CheckText(strings.ReplaceAll(s, "\n", " "), MaxDescriptionLen)
}

func forbiddenRune(r rune) bool {
	switch {
	case unicode.IsControl(r), r == '\u2028', r == '\u2029': // C0, DEL, C1; line and paragraph separators
		return true
	case r == '\u061C', r == '\u200E', r == '\u200F': // arabic letter, left-to-right and right-to-left marks
		return true
	case r >= '\u202A' && r <= '\u202E', r >= '\u2066' && r <= '\u2069': // embeddings, overrides, isolates
		return true
	}
	return false
}

// ValidRequestID reports whether a client-chosen request id is acceptable:
// 8 to 64 characters of [A-Za-z0-9_-]. A loop rather than a regexp: every
// buy checks one, and the regexp was 2% of a sold-out answer's CPU.
func ValidRequestID(id string) bool {
	if len(id) < 8 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// ValidUserID reports whether a user id (a token's subject) is acceptable:
// 1 to 64 printable characters without "|", which separates fields in the
// Redis records.
func ValidUserID(id string) bool {
	if len(id) < 1 || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if r <= ' ' || r == '|' || r == 0x7f {
			return false
		}
	}
	return true
}
