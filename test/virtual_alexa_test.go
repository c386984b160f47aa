//go:build e2e

package e2e_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/unsay/unsay/test/harness"
)

// TestVirtualAlexa_InteractionModelDrivesTheSkill lets virtual-alexa turn
// utterances into requests from skill-package's en-US model and post them to
// the running /alexa (--alexa-verify=false --default-patient ray: the one
// place that flag is used, since virtual-alexa cannot sign): launch, the
// walking instruction in several phrasings, "what changed", help, stop, and
// every intent of the model answered by the running skill.
func TestVirtualAlexa_InteractionModelDrivesTheSkill(t *testing.T) {
	const part = "3 virtual-alexa"
	node := needNode(t, part, "virtual-alexa")
	model := harness.ModelPath(repoRoot, "en-US")
	pending(t, part, landed(filepath.Join("skill-package", "interactionModels", "custom", "en-US.json")))
	s := startServer(t, part, "--alexa-verify=false", "--default-patient", "ray", "--alexa-skill-id", harness.SkillID)
	runChecks(t, node, "virtual-alexa.mjs", []string{
		"ALEXA_URL=" + s.URL + "/alexa", "MODEL=" + model, "SKILL_ID=" + harness.SkillID,
	}, 2*time.Minute)
}
