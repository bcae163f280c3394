// Package locale is the languages Seckill speaks: English and Simplified
// Chinese, each with one catalogue (web/static/i18n/<lang>.json) that
// holds every string of the pages and the message of every outcome code
// ("code.<code>"). The pages read their catalogue themselves; the server
// reads the codes' messages from it to answer in the language a request
// asks for (Accept-Language). The codes themselves never change.
package locale

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/text/language"

	"github.com/seckill/seckill/web"
)

// Tags are the languages, the default first; Files their catalogues in
// web.Static, in the same order.
var (
	Tags  = []language.Tag{language.English, language.SimplifiedChinese}
	Files = []string{"i18n/en.json", "i18n/zh-CN.json"}
)

// Default is the language of a request that asks for none Seckill speaks.
var Default = Tags[0]

var matcher = language.NewMatcher(Tags)

// maxAcceptLanguage bounds the Accept-Language header parsed: a refusal
// costs no more to a header of a megabyte.
const maxAcceptLanguage = 256

// Of is the language to answer an Accept-Language header in: its best
// match among Tags, Default when nothing matches. An empty header or one
// that starts with English costs no parsing: most requests of a flash
// sale are buys from programs and English-speaking browsers.
func Of(acceptLanguage string) language.Tag {
	switch {
	case acceptLanguage == "" || strings.HasPrefix(acceptLanguage, "en"):
		return Default
	case acceptLanguage == "zh-CN": // what the pages send
		return language.SimplifiedChinese
	case len(acceptLanguage) > maxAcceptLanguage:
		return Default // no browser sends that much: not worth parsing
	}
	tags, _, err := language.ParseAcceptLanguage(acceptLanguage)
	if err != nil || len(tags) == 0 {
		return Default
	}
	_, i, conf := matcher.Match(tags...)
	if conf == language.No {
		return Default
	}
	return Tags[i]
}

// Catalogue is one language's strings by key.
type Catalogue map[string]string

// catalogues are the languages' catalogues, read once from web.Static.
var catalogues = func() map[language.Tag]Catalogue {
	m := map[language.Tag]Catalogue{}
	for i, tag := range Tags {
		c, err := Read(Files[i])
		if err != nil {
			panic(err) // the catalogues are embedded: a test reads them first
		}
		m[tag] = c
	}
	return m
}()

// Read decodes the catalogue file name of web.Static.
func Read(name string) (Catalogue, error) {
	raw, err := fs.ReadFile(web.Static, name)
	if err != nil {
		return nil, fmt.Errorf("locale: %w", err)
	}
	var c Catalogue
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("locale: %s: %w", name, err)
	}
	return c, nil
}

// Message is key's string in tag's catalogue, and whether it has one.
func Message(tag language.Tag, key string) (string, bool) {
	s, ok := catalogues[tag][key]
	return s, ok && s != ""
}

// CodeKey is the catalogue key of an outcome code's message.
func CodeKey(code string) string { return "code." + code }

// digits are the figures of a field's message, which its catalogue key
// holds as {0}, {1}, … in order.
var digits = regexp.MustCompile(`[0-9]+`)

// Field is a refusal's message about one field in tag's language: the
// catalogue's "field.<message with its figures as {0}, {1}…>", the
// figures put back; the message as it is when the catalogue lacks it.
func Field(tag language.Tag, msg string) string {
	if tag == Default {
		return msg
	}
	var figures []string
	key := "field." + digits.ReplaceAllStringFunc(msg, func(d string) string {
		figures = append(figures, d)
		return "{" + strconv.Itoa(len(figures)-1) + "}"
	})
	s, ok := Message(tag, key)
	if !ok {
		return msg
	}
	for i, f := range figures {
		s = strings.ReplaceAll(s, "{"+strconv.Itoa(i)+"}", f)
	}
	return s
}
