package httpapi_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"

	"github.com/unsay/unsay/bridge/httpapi"
)

// A clinician's system signs the raw body of a write with the shared
// write secret and the current time, and sends both headers; the server
// verifies the same bytes before it parses anything (P-12). Any change to
// the body, the timestamp or the secret changes the signature.
func ExampleSignWrite() {
	secret := []byte("an-example-write-secret-of-32-bytes!")
	body := []byte(`{"patient":"ray","domain":"weight_bearing","audience":"user","value":"Full weight-bearing as tolerated.","authorId":"okafor","authorLabel":"Sarah Okafor, physio"}`)
	ts := int64(1791450000) // Unix seconds; the server allows ±300 s

	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:8080/write", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(httpapi.HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(httpapi.HeaderSignature, httpapi.SignWrite(secret, ts, body))

	fmt.Println(httpapi.HeaderTimestamp+":", req.Header.Get(httpapi.HeaderTimestamp))
	fmt.Println(httpapi.HeaderSignature+":", req.Header.Get(httpapi.HeaderSignature))
	fmt.Println("a second later:", httpapi.SignWrite(secret, ts+1, body) == req.Header.Get(httpapi.HeaderSignature))
	// Output:
	// X-Unsay-Timestamp: 1791450000
	// X-Unsay-Signature: v1=ae073a3373e89c071ceb614a930f7ffed96feabda373a29324010015d34742be
	// a second later: false
}
