package skill

import (
	"encoding/json"
	"strings"

	segjson "github.com/segmentio/encoding/json"

	"github.com/unsay/unsay/apl"
)

// Request types this skill answers (Alexa Skills Kit request types).
const (
	TypeLaunch             = "LaunchRequest"
	TypeIntent             = "IntentRequest"
	TypeSessionEnded       = "SessionEndedRequest"
	TypeAPLUserEvent       = "Alexa.Presentation.APL.UserEvent"
	TypeExceptionEncounter = "System.ExceptionEncountered"
	// SkillEventPrefix starts every skill-lifecycle event type
	// (AlexaSkillEvent.SkillEnabled, …); they get the 3,600 s timestamp window.
	SkillEventPrefix = "AlexaSkillEvent."
)

// Intents this skill handles. HandledIntents lists them all.
const (
	IntentCarePlan     = "CarePlanIntent"
	IntentWhatsChanged = "WhatsChangedIntent"
	IntentMore         = "MoreIntent"
	IntentLinkDevice   = "LinkDeviceIntent"
	IntentHelp         = "AMAZON.HelpIntent"
	IntentStop         = "AMAZON.StopIntent"
	IntentCancel       = "AMAZON.CancelIntent"
	IntentFallback     = "AMAZON.FallbackIntent"
	IntentNavigateHome = "AMAZON.NavigateHomeIntent"
	IntentRepeat       = "AMAZON.RepeatIntent"
	IntentPlayClip     = "PlayClipIntent" // "play my exercise count" (clip.go)
)

// Slot names of the custom intents.
const (
	SlotTopic = "topic" // CarePlanIntent, custom type CareTopic; resolution id = domain
	SlotCode  = "code"  // LinkDeviceIntent, AMAZON.NUMBER
)

// HandledIntents returns every intent name the router answers, custom and built-in.
func HandledIntents() []string {
	return []string{IntentCarePlan, IntentWhatsChanged, IntentMore, IntentLinkDevice, IntentPlayClip,
		IntentHelp, IntentStop, IntentCancel, IntentFallback, IntentNavigateHome, IntentRepeat}
}

// APLInterface is the supportedInterfaces key of a device that renders APL.
const APLInterface = "Alexa.Presentation.APL"

// RequestEnvelope is the JSON body Alexa POSTs for each turn (the ASK
// request format).
// Session is nil for out-of-session requests.
type RequestEnvelope struct {
	Version string   `json:"version"`
	Session *Session `json:"session,omitempty"`
	Context Context  `json:"context"`
	Request Request  `json:"request"`
}

// ParseEnvelope decodes an Alexa request body into a RequestEnvelope, with
// the semantics of encoding/json (unknown fields ignored, names matched
// case-insensitively, the last of duplicate keys wins, invalid UTF-8
// replaced by U+FFFD) through github.com/segmentio/encoding/json, the MCP
// SDK's own decoder: about a quarter of encoding/json's CPU on a Launch
// body. FuzzParseEnvelope_DecodesAsEncodingJSONDoes holds the equivalence.
// It returns the decoder's error for a body that is not one JSON object of
// the envelope's shape; the caller wraps it (ErrMalformed).
func ParseEnvelope(body []byte) (*RequestEnvelope, error) {
	env := new(RequestEnvelope)
	if err := segjson.Unmarshal(body, env); err != nil {
		return nil, err
	}
	return env, nil
}

// Session is the request's session. Of its attributes only AttrMarked,
// AttrConfirmed and AttrResponse are read, on a SessionEndedRequest with
// reason ERROR (notplayed.go).
type Session struct {
	New         bool           `json:"new"`
	SessionID   string         `json:"sessionId"`
	Application Application    `json:"application"`
	User        User           `json:"user"`
	Attributes  map[string]any `json:"attributes,omitempty"`
}

// Application names the skill.
type Application struct {
	ApplicationID string `json:"applicationId"`
}

// User is the Alexa account that spoke.
type User struct {
	UserID      string `json:"userId"`
	AccessToken string `json:"accessToken,omitempty"`
}

// Context is the device and application context. The skill id is checked
// against Context.System.Application, never the session's.
type Context struct {
	System   System    `json:"System"`
	Viewport *Viewport `json:"Viewport,omitempty"`
}

// System carries the application, user, device and the regional API endpoint.
type System struct {
	Application    Application `json:"application"`
	User           User        `json:"user"`
	Device         Device      `json:"device"`
	APIEndpoint    string      `json:"apiEndpoint"`
	APIAccessToken string      `json:"apiAccessToken,omitempty"`
}

// Device lists the interfaces the device supports, keyed by interface name.
type Device struct {
	DeviceID            string                     `json:"deviceId"`
	SupportedInterfaces map[string]json.RawMessage `json:"supportedInterfaces,omitempty"`
}

// Viewport is the screen's description (dimensions in pixels).
type Viewport struct {
	Shape       string `json:"shape,omitempty"`
	Mode        string `json:"mode,omitempty"`
	PixelWidth  int    `json:"pixelWidth,omitempty"`
	PixelHeight int    `json:"pixelHeight,omitempty"`
	DPI         int    `json:"dpi,omitempty"`
}

// Request is the union of the request types this skill reads.
type Request struct {
	Type        string `json:"type"`
	RequestID   string `json:"requestId"`
	Timestamp   string `json:"timestamp"`
	Locale      string `json:"locale,omitempty"`
	Intent      Intent `json:"intent"`
	DialogState string `json:"dialogState,omitempty"`
	// SessionEndedRequest: USER_INITIATED, ERROR or EXCEEDED_MAX_REPROMPTS.
	Reason string `json:"reason,omitempty"`
	// SessionEndedRequest and System.ExceptionEncountered.
	Error *Error `json:"error,omitempty"`
	Cause *Cause `json:"cause,omitempty"`
	// Alexa.Presentation.APL.UserEvent.
	Token     string            `json:"token,omitempty"`
	Arguments []json.RawMessage `json:"arguments,omitempty"`
	Source    json.RawMessage   `json:"source,omitempty"`
}

// Error is a SessionEnded or ExceptionEncountered error.
type Error struct {
	Type    string `json:"type"`
	Message string `json:"message,omitempty"`
}

// Cause names the request that caused a System.ExceptionEncountered.
type Cause struct {
	RequestID string `json:"requestId"`
}

// Intent is a recognized intent with its slots.
type Intent struct {
	Name               string          `json:"name"`
	ConfirmationStatus string          `json:"confirmationStatus,omitempty"`
	Slots              map[string]Slot `json:"slots,omitempty"`
}

// Slot is one slot value with its entity resolutions.
type Slot struct {
	Name               string       `json:"name"`
	Value              string       `json:"value,omitempty"`
	ConfirmationStatus string       `json:"confirmationStatus,omitempty"`
	Resolutions        *Resolutions `json:"resolutions,omitempty"`
}

// Resolutions holds entity resolution results per authority.
type Resolutions struct {
	ResolutionsPerAuthority []Resolution `json:"resolutionsPerAuthority"`
}

// Resolution is one authority's result; Status.Code is ER_SUCCESS_MATCH,
// ER_SUCCESS_NO_MATCH or ER_ERROR_*.
type Resolution struct {
	Authority string `json:"authority"`
	Status    struct {
		Code string `json:"code"`
	} `json:"status"`
	Values []struct {
		Value struct {
			Name string `json:"name"`
			ID   string `json:"id"`
		} `json:"value"`
	} `json:"values"`
}

// ResolvedID returns the id of the first value of the first authority whose
// status is ER_SUCCESS_MATCH, and false when there is none (missing slot,
// ER_SUCCESS_NO_MATCH, errors).
func (s Slot) ResolvedID() (string, bool) {
	if s.Resolutions == nil {
		return "", false
	}
	for _, r := range s.Resolutions.ResolutionsPerAuthority {
		if r.Status.Code == "ER_SUCCESS_MATCH" && len(r.Values) > 0 && r.Values[0].Value.ID != "" {
			return r.Values[0].Value.ID, true
		}
	}
	return "", false
}

// SupportsAPL reports whether the device lists Alexa.Presentation.APL with
// a runtime the cards can render on (apl.Renderable: APL 1.4 or later, or
// no maxVersion given). An older screen gets the voice-only answer.
func (e *RequestEnvelope) SupportsAPL() bool {
	_, ok := e.Context.System.Device.SupportedInterfaces[APLInterface]
	return ok && apl.Renderable(e.APLMaxVersion())
}

// APLMaxVersion is supportedInterfaces["Alexa.Presentation.APL"].runtime.maxVersion,
// or "" when the device does not say.
func (e *RequestEnvelope) APLMaxVersion() string {
	var iface struct {
		Runtime struct {
			MaxVersion string `json:"maxVersion"`
		} `json:"runtime"`
	}
	if raw, ok := e.Context.System.Device.SupportedInterfaces[APLInterface]; ok {
		_ = json.Unmarshal(raw, &iface)
	}
	return iface.Runtime.MaxVersion
}

// UserID is the Alexa user id, from context.System (or the session when absent).
func (e *RequestEnvelope) UserID() string {
	if id := e.Context.System.User.UserID; id != "" {
		return id
	}
	if e.Session != nil {
		return e.Session.User.UserID
	}
	return ""
}

// SessionID is the session id, or "" for an out-of-session request.
func (e *RequestEnvelope) SessionID() string {
	if e.Session == nil {
		return ""
	}
	return e.Session.SessionID
}

// FirstArgument is the first APL UserEvent argument when it is a string.
func (r *Request) FirstArgument() string {
	if len(r.Arguments) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(r.Arguments[0], &s) != nil {
		return ""
	}
	return s
}

// IsSkillEvent reports whether the request is an AlexaSkillEvent.* request.
func (r *Request) IsSkillEvent() bool { return strings.HasPrefix(r.Type, SkillEventPrefix) }

// ResponseEnvelope is the JSON the skill answers with (the ASK response
// format). Conversation state stays server-side; the session attributes
// hold only what the response marked heard (AttrMarked), what it may have
// confirmed (AttrConfirmed) and its id (AttrResponse), so that Alexa's
// report that it did not play it can re-open it, once (P-24).
type ResponseEnvelope struct {
	Version           string         `json:"version"`
	SessionAttributes map[string]any `json:"sessionAttributes,omitempty"`
	Response          ResponseBody   `json:"response"`
}

// ResponseBody is a response. ShouldEndSession has three states: true (leave),
// false (ask: the microphone opens and Reprompt follows silence) and nil
// (omitted: a screen device keeps the session without opening the microphone).
type ResponseBody struct {
	OutputSpeech     *OutputSpeech `json:"outputSpeech,omitempty"`
	Card             *Card         `json:"card,omitempty"`
	Reprompt         *Reprompt     `json:"reprompt,omitempty"`
	Directives       []Directive   `json:"directives,omitempty"`
	ShouldEndSession *bool         `json:"shouldEndSession,omitempty"`
}

// OutputSpeech is SSML speech; this skill speaks only SSML.
type OutputSpeech struct {
	Type         string `json:"type"` // "SSML"
	SSML         string `json:"ssml,omitempty"`
	Text         string `json:"text,omitempty"`
	PlayBehavior string `json:"playBehavior,omitempty"`
}

// Reprompt is spoken when the user stays silent after a question.
type Reprompt struct {
	OutputSpeech OutputSpeech `json:"outputSpeech"`
}

// Card is a card for the Alexa app: Simple (title and content), or
// LinkAccount (type only: the Alexa app offers account linking).
type Card struct {
	Type    string `json:"type"` // "Simple" or "LinkAccount"
	Title   string `json:"title,omitempty"`
	Content string `json:"content,omitempty"`
}

// Directive is an APL directive. RenderDocument uses Token, Document and
// Datasources; Token always names the document (apl.Token*).
type Directive struct {
	Type        string          `json:"type"`
	Token       string          `json:"token"`
	Document    json.RawMessage `json:"document,omitempty"`
	Datasources map[string]any  `json:"datasources,omitempty"`
}

// RenderDocumentType is the APL RenderDocument directive type.
const RenderDocumentType = "Alexa.Presentation.APL.RenderDocument"
