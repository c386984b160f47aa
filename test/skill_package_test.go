//go:build e2e

package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestSkillPackage_ValidAgainstSMAPIModel validates skill-package/skill.json
// and every interaction model — in the source folder and in the build copy
// the generator writes for `ask deploy` — against ask-smapi-model's spec.json with ajv,
// each with a broken twin that must be refused. That every model intent is
// handled is proved twice: by the skill's own Go test (go test ./skill/...,
// counted under the Go packages) and against the running server by part 3.
func TestSkillPackage_ValidAgainstSMAPIModel(t *testing.T) {
	const part = "5 skill package"
	node := needNode(t, part, "ajv", "ask-smapi-model")
	pending(t, part, landed(filepath.Join("skill-package", "skill.json")))
	resources := filepath.Join(repoRoot, "ask-resources.json")
	if _, err := os.Stat(resources); err != nil {
		resources = filepath.Join(repoRoot, "skill-package", "ask-resources.json")
	}
	runChecks(t, node, "skill-package.mjs", []string{
		"LABEL=source", "PKG=" + filepath.Join(repoRoot, "skill-package"), "RESOURCES=" + resources,
	}, time.Minute)

	// The build copy `make skill-package PUBLIC_URL=…` writes is what `ask deploy` uploads.
	const public = "https://care.e2e.example"
	out := filepath.Join(t.TempDir(), "build")
	cmd := exec.Command("go", "run", "./skill-package/gen", "-public-url", public, "-out", out)
	cmd.Dir = repoRoot
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("skill-package generator: %v\n%s", err, b)
	}
	runChecks(t, node, "skill-package.mjs", []string{
		"LABEL=build copy", "PKG=" + filepath.Join(out, "skill-package"), "RESOURCES=" + filepath.Join(out, "ask-resources.json"),
		"EXPECT_ENDPOINT=" + public + "/alexa",
	}, time.Minute)

	// The account-linking request beside it, and the committed template.
	runChecks(t, node, "account-linking.mjs", []string{"LABEL=build copy", "FILE=" + filepath.Join(out, "accountLinking.json"),
		"EXPECT_BASE=" + public}, time.Minute)
	runChecks(t, node, "account-linking.mjs", []string{"LABEL=source", "FILE=" + filepath.Join(repoRoot, "skill-package", "accountLinking.json")}, time.Minute)
}
