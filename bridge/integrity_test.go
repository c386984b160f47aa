package bridge

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRead_P5_AVersionChangedInTheDatabaseIsAnInternalErrorNeverItsWords:
// a version whose value was edited in the database (F12) is not served:
// resources/read answers -32603 (not the not-found of P-2: the speech
// principal must not drop the retraction, nor quote the words); the
// untouched version of the same fact is still served (positive twin).
func TestRead_P5_AVersionChangedInTheDatabaseIsAnInternalErrorNeverItsWords(t *testing.T) {
	h := newHarness(t)
	c := h.connect(h.token("speech", userScopes))
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+h.dsn+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const forged = "You may now run and jump freely."
	if _, err := db.ExecContext(ctx, `UPDATE versions SET value = CAST(? AS BLOB) WHERE patient = 'ray' AND domain = 'weight_bearing' AND n = 1`, forged); err != nil {
		t.Fatal(err)
	}
	res, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "care://ray/weight_bearing/v1"})
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != jsonrpc.CodeInternalError {
		t.Fatalf("read of the edited version = %+v, %v; want -32603", res, err)
	}
	ok, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "care://ray/weight_bearing/v2"})
	if err != nil || len(ok.Contents) == 0 || ok.Contents[0].Text == "" {
		t.Fatalf("read of the untouched version = %+v, %v", ok, err)
	}
}
