//go:build e2e

package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSkillPackage_APLDocumentsCleanUnderAPLSuggester lints every APL
// document Unsay sends or deploys — apl/documents/*.json and the skill
// package's response/display copies — with Amazon's apl-suggester (npm,
// pinned): no finding, and no property its component schemas mark
// deprecated; a broken twin proves the linter flags both defects it was
// run for (a Container borderWidth, a Frame backgroundColor).
func TestSkillPackage_APLDocumentsCleanUnderAPLSuggester(t *testing.T) {
	const part = "5 skill package"
	node := needNode(t, part, "apl-suggester")
	docs, _ := filepath.Glob(filepath.Join(repoRoot, "apl", "documents", "*.json"))
	display, _ := filepath.Glob(filepath.Join(repoRoot, "skill-package", "response", "display", "*", "document.json"))
	files := append(docs, display...)
	if len(docs) == 0 || len(display) != len(docs) {
		t.Fatalf("apl/documents has %d documents, skill-package/response/display %d", len(docs), len(display))
	}
	runChecks(t, node, "apl-lint.mjs", []string{"FILES=" + strings.Join(files, string(os.PathListSeparator))}, time.Minute)
}
