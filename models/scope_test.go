package models

import "testing"

func TestCanWrite_AssistantOnlyFactsNeedTheirOwnWriteScope(t *testing.T) {
	t.Parallel()
	write := Principal{Scopes: []Scope{ScopeWrite}, Patients: []string{"ray"}}
	both := Principal{Scopes: []Scope{ScopeWrite, ScopeWriteAssistant}, Patients: []string{"ray"}}
	assistantOnly := Principal{Scopes: []Scope{ScopeWriteAssistant}, Patients: []string{"ray"}}
	link := Principal{Scopes: []Scope{ScopeLink}, Patients: []string{"ray"}}
	for _, tc := range []struct {
		name    string
		p       Principal
		patient string
		a       Audience
		want    bool
	}{
		{"care.write writes a speakable fact", write, "ray", AudienceUser, true},
		{"care.write alone does not write an assistant-only fact", write, "ray", AudienceAssistant, false},
		{"care.write + care.write.assistant writes an assistant-only fact", both, "ray", AudienceAssistant, true},
		{"care.write.assistant without care.write writes nothing", assistantOnly, "ray", AudienceAssistant, false},
		{"care.link writes nothing", link, "ray", AudienceUser, false},
		{"another patient", both, "sue", AudienceUser, false},
		{"an unknown audience", both, "ray", Audience("admin"), false},
	} {
		if got := tc.p.CanWrite(tc.patient, tc.a); got != tc.want {
			t.Errorf("%s: CanWrite = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPartitions_WriteScopeFollowsTheAudience(t *testing.T) {
	t.Parallel()
	if WriteScope(AudienceUser) != ScopeWrite || WriteScope(AudienceAssistant) != ScopeWriteAssistant || WriteScope("admin") != "" {
		t.Fatalf("WriteScope: user %q, assistant %q, unknown %q", WriteScope(AudienceUser), WriteScope(AudienceAssistant), WriteScope("admin"))
	}
	for _, s := range AllScopes() {
		if !s.Valid() {
			t.Errorf("advertised scope %q is not Valid", s)
		}
	}
	if Scope("care.write.everything").Valid() {
		t.Error("an unknown scope is Valid")
	}
}
