package skill

import (
	"context"
	"errors"
)

// AccountLinks is implemented by a Links that also maps Alexa account
// linking to patients: the access token Alexa sends in
// context.System.user.accessToken once a carer linked the skill in the
// Alexa app (OAuth 2.1 authorization code + PKCE against Unsay's
// authorization server). bridge/app implements it by verifying the token
// like any bearer token (signature, expiry, audience, grant not revoked);
// the skill never sees how (P-18).
type AccountLinks interface {
	// PatientForAccessToken returns the one patient the token is bound to.
	// Errors: ErrAccessTokenInvalid (unverifiable, expired, revoked, or not
	// care.read.user for exactly one patient), or an internal error.
	PatientForAccessToken(ctx context.Context, accessToken string) (patient string, err error)
}

// ErrAccessTokenInvalid: the account-linking access token does not verify
// or its grant was revoked. The skill then falls back to a code link, else
// asks for linking again with a LinkAccount card.
var ErrAccessTokenInvalid = errors.New("account-linking access token invalid or revoked")

// What the skill says about account linking.
const (
	textAccountUnlinked = "This device isn't linked to a care plan yet. I've put a card in the Alexa app: open it and choose Link account. " +
		"Or ask your carer for a six-digit code, then say: my code is, and the number."
	// textAccountNotWorking answers a token that was refused: revoked,
	// expired, for another service, or never a token at all — the skill
	// cannot tell which, so it does not say the link "was removed".
	textAccountNotWorking = "This device's link to a care plan isn't working: it may have run out or been removed, or never been set up. " +
		"To link it, open the card I've put in the Alexa app and choose Link account. " +
		"Or ask your carer for a six-digit code, then say: my code is, and the number."
)

// CardLinkAccount is the card that sends the user to account linking in
// the Alexa app.
const CardLinkAccount = "LinkAccount"

func (s *Skill) accountLinks() (AccountLinks, bool) {
	al, ok := s.links.(AccountLinks)
	return al, ok
}

// accessToken is the request's account-linking token (context first, the
// session's as Alexa also sends it there).
func accessToken(env *RequestEnvelope) string {
	if t := env.Context.System.User.AccessToken; t != "" {
		return t
	}
	if env.Session != nil {
		return env.Session.User.AccessToken
	}
	return ""
}

// accountLinkedPatient maps the request's access token to its patient.
// ok is false without a token, without account linking, or when the token
// is refused (ErrAccessTokenInvalid: the caller falls back to a code link);
// err is an internal failure only.
func (s *Skill) accountLinkedPatient(ctx context.Context, env *RequestEnvelope) (patient string, ok bool, err error) {
	tok := accessToken(env)
	al, linking := s.accountLinks()
	if tok == "" || !linking {
		return "", false, nil
	}
	p, err := al.PatientForAccessToken(ctx, tok)
	switch {
	case errors.Is(err, ErrAccessTokenInvalid):
		s.log.Info("alexa access token refused", "reason", err.Error())
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	return p, p != "", nil
}

// defaultPatientFor is Config.DefaultPatient (--default-patient, the demo)
// for a request that reached it unlinked: only one that carries no
// account-linking token. A request whose token was refused (patientFor
// tries it first: unverifiable, expired, revoked) is not an unlinked
// demo device but a linked one whose link is gone, so it is told so and
// gets the LinkAccount card as without the flag (unlinkedReplyFor,
// offerAccountLinking) — never served, and never spending another
// patient's retraction, as the default patient. Without account linking
// configured no token is ever verified, and the default applies as before.
func (s *Skill) defaultPatientFor(env *RequestEnvelope) string {
	if _, linking := s.accountLinks(); linking && accessToken(env) != "" {
		if s.cfg.DefaultPatient != "" {
			s.log.Info("alexa access token refused; the default patient is only for a device that sends none", "default", s.cfg.DefaultPatient)
		}
		return ""
	}
	return s.cfg.DefaultPatient
}

// unlinkedReplyFor is the reply to an unlinked device: with account
// linking, the spoken explanation offers both ways (the Alexa app's Link
// account, or a six-digit code by voice) and says so when a token was sent
// but refused (textAccountNotWorking); without it, the code only.
func (s *Skill) unlinkedReplyFor(env *RequestEnvelope) reply {
	r := unlinkedReply(env)
	if _, linking := s.accountLinks(); !linking || r.question != textUnlinked {
		return r
	}
	r.question = textAccountUnlinked
	if accessToken(env) != "" {
		r.question = textAccountNotWorking
	}
	return r
}

// offerAccountLinking adds the LinkAccount card to a reply that asks an
// unlinked device to link (not to a tick or a goodbye).
func (s *Skill) offerAccountLinking(out *ResponseEnvelope) {
	if _, linking := s.accountLinks(); !linking || out.Response.Reprompt == nil {
		return
	}
	out.Response.Card = &Card{Type: CardLinkAccount}
}
