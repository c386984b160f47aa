package skill

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/unsay/unsay/apl"
	"github.com/unsay/unsay/models"
)

// Device linking by voice: "my code is …" redeems a six-digit code a carer
// created with POST /link (LinkDeviceIntent); an unlinked device hears only
// how to link.

func unlinkedReply(env *RequestEnvelope) reply {
	switch {
	case env.Request.Type == TypeAPLUserEvent && env.Request.FirstArgument() == apl.ArgTick:
		return reply{empty: true}
	case env.Request.Type == TypeIntent && isLeaving(env.Request.Intent.Name):
		return reply{segs: say(textGoodbye), end: endLeave, forget: true}
	}
	return reply{question: textUnlinked, reprompt: textLinkPrompt, card: cardLink}
}

// linkDevice redeems a six-digit code (100000–999999) and, once linked,
// answers like a launch for the new patient.
func (s *Skill) linkDevice(ctx context.Context, env *RequestEnvelope, now time.Time) handled {
	t := &turn{s: s, ctx: ctx, env: env, now: now, apl: env.SupportsAPL()}
	if s.links == nil {
		return s.build(t, reply{segs: say(textLinkOff), end: endLeave})
	}
	code := strings.ReplaceAll(strings.TrimSpace(env.Request.Intent.Slots[SlotCode].Value), " ", "")
	switch {
	case code == "" || code == "?":
		return s.build(t, reply{question: textCodeAsk, reprompt: textLinkPrompt, card: cardLink})
	case !validLinkCode(code):
		return s.build(t, reply{question: textCodeShape, reprompt: textLinkPrompt, card: cardLink})
	}
	patient, err := s.links.RedeemLinkCode(ctx, env.UserID(), env.Context.System.APIEndpoint, code, now)
	var paused *LinkPausedError
	switch {
	case errors.As(err, &paused):
		return s.build(t, reply{segs: say(codePaused(paused.Until.Sub(now))), end: endLeave})
	case errors.Is(err, ErrLinkBlocked):
		return s.build(t, reply{segs: say(textCodeBlocked), end: endLeave})
	case errors.Is(err, ErrLinkCodeInvalid):
		return s.build(t, reply{question: textCodeWrong, reprompt: textLinkPrompt, card: cardLink})
	case err != nil:
		s.log.Error("alexa link code", "err", err)
		return s.build(t, reply{segs: say(textSorry), end: endLeave})
	case !models.ValidID(patient):
		s.log.Error("alexa link code: invalid patient id from Links", "patient", patient)
		return s.build(t, reply{segs: say(textSorry), end: endLeave})
	}
	s.log.Info("alexa device linked", "patient", patient)
	release := s.lockPatient(patient)
	lt := s.newTurn(ctx, env, now, patient)
	lt.prefix = say(textLinked)
	h := s.build(lt, linkedLaunch(lt))
	h.release = release
	h.turn, h.route = lt, linkedLaunch
	return h
}

// linkedLaunch answers the turn that linked the device: the launch, after
// what he is owed — or, when the notes cannot be confirmed, nothing as
// current (P-24).
func linkedLaunch(t *turn) reply {
	if err := t.load(); err != nil {
		t.s.log.Error("alexa care notes not confirmed; nothing said as current", "patient", t.patient, "err", err)
		return reply{segs: say(textUnreachable, changedSince(t.snap.Withdrawn), textTryAgain), end: endLeave}
	}
	t.announce()
	return t.launch()
}

func validLinkCode(code string) bool {
	if len(code) != 6 || code[0] == '0' {
		return false
	}
	for i := 0; i < len(code); i++ {
		if code[i] < '0' || code[i] > '9' {
			return false
		}
	}
	return true
}
