package skill

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/unsay/unsay/models"
)

// What the skill says in its own words. Clinicians' words are quoted
// (models.Quote), never reworded; facts and announcements are rendered by
// models (RenderFact, Announcement.Render), each in one place.
const (
	textQuestion     = "What would you like to know?"
	textNothingNew   = "Nothing has changed since you last heard your care notes."
	textNothingMore  = "There's nothing more to add."
	textNoRepeat     = "There is nothing I can repeat right now."
	textGoodbye      = "Goodbye."
	textAskNextTime  = "Ask me what changed next time."
	textSorry        = "Sorry, I can't reach your care notes right now. Please try again in a minute."
	textEmptyNotes   = "There is nothing in your care notes yet."
	textUnlinked     = "This device isn't linked to a care plan yet. Ask your carer for a six-digit code, then say: my code is, and the number."
	textLinkPrompt   = "Say: my code is, and the six digits."
	textCodeAsk      = "What is your six-digit code? Say: my code is, and the number."
	textCodeShape    = "A linking code has six digits. Say: my code is, and the number."
	textCodeWrong    = "That code didn't work. A code lasts ten minutes and works once. Ask your carer for a new one, then say: my code is, and the number."
	textCodeBlocked  = "Too many wrong codes were tried. Please wait fifteen minutes, then ask your carer for a new code."
	textLinkOff      = "Linking isn't set up here. Please ask your carer."
	textLinked       = "This device is now linked to your care plan."
	textMoreReprompt = "Say more to continue, or ask me something else."

	// P-24: what is said when the care notes cannot be confirmed current.
	textUnreachable = "I can't reach your care notes right now, so I won't read you an instruction that may have changed."
	textTryAgain    = "Please try again in a minute, or call your care team."
)

// codePaused says that linking is paused for every device after too many
// wrong codes from all of them, and for how long: wait rounded up to whole
// minutes, at least one ("Please try your code again in four minutes.").
func codePaused(wait time.Duration) string {
	n := max(1, int((wait+time.Minute-1)/time.Minute))
	unit := " minutes"
	if n == 1 {
		unit = " minute"
	}
	return "Too many wrong codes were tried on this service just now, so linking is paused for everyone. Please try your code again in " +
		models.SpellNumber(n) + unit + ". If it has run out by then, ask your carer for a new one."
}

// changedSince says which instructions he heard are withdrawn, when their
// new words cannot be confirmed: "Your walking instruction has changed
// since I last told you." (two: "Your walking and blood thinner
// instructions have…").
func changedSince(withdrawn []models.URI) string {
	var topics []string
	for _, u := range withdrawn {
		t := models.Topic(u.Domain)
		if !containsString(topics, t) {
			topics = append(topics, t)
		}
	}
	switch len(topics) {
	case 0:
		return ""
	case 1:
		return "Your " + topics[0] + " instruction has changed since I last told you."
	}
	return "Your " + models.JoinAnd(topics) + " instructions have changed since I last told you."
}

// owedOnLeaving says, as he leaves, what is still owed to him and was not
// said: "Your walking instruction has changed since I last told you. There
// is a new wound care instruction in your care notes. Ask me what changed
// next time." — "" when nothing is owed.
func owedOnLeaving(owed []models.Announcement) string {
	var withdrawn []models.URI
	var fresh []string
	for _, a := range owed {
		if a.IsRetraction() {
			withdrawn = append(withdrawn, a.URI())
		} else if t := models.Topic(a.Current.Domain); !containsString(fresh, t) {
			fresh = append(fresh, t)
		}
	}
	var parts []string
	if s := changedSince(withdrawn); s != "" {
		parts = append(parts, s)
	}
	for _, t := range fresh {
		parts = append(parts, "There is a new "+t+" instruction in your care notes.")
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(append(parts, textAskNextTime), " ")
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}
