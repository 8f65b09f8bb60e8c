package jsontest

// Seeds returns the one seed corpus of the module's JSON fuzz targets:
// every target that keeps a hand-written JSON codec equal to its reference
// adds these (f.Add), whatever its input, so that what one codec's corners
// are is tried on all of them. A target whose input is not one document
// builds its arguments from Seeds and Strings. The corners of the grammar
// (Cases, but the deep and long ones, which would only slow the fuzzer),
// a realistic payload, nesting that crosses the validator's stack words,
// and the shapes of the bodies the hand codecs read and write: the append
// request, the append answer, data with names given twice or escaped.
// Add an input here, not in one target: every target then tries it.
func Seeds() [][]byte {
	var seeds [][]byte
	for _, c := range Cases() {
		if len(c.In) < 1000 {
			seeds = append(seeds, []byte(c.In))
		}
	}
	seeds = append(seeds, []byte(Realistic), []byte(Nested(70, false)), []byte(Alternating(70)))
	for _, s := range documents {
		seeds = append(seeds, []byte(s))
	}
	return seeds
}

// documents are the seeds the codecs' own fuzz targets kept before they
// shared this corpus.
var documents = []string{
	// Values with escapes, nesting and names a cursor must skip or refuse.
	`{"a":1,"b":{"a":2}}`,
	`[{"a":1,"a":2}]`,
	`{"x":[{"y":{}},{"y":[]}],"y":1}`,
	`"s"`,
	`{"a":"b","c":[1,{"d":"\"}"}]}`,
	`{"a`,
	`{"a":[`,
	` { "a" : [ 1 , "b c" , "\" d" , "\\" ] } `,
	"[\"\\u00e9 \\n\",\t{\"k\" :null}]",
	`"x"`,

	// Append bodies (POST /v1/streams/{stream}), plain and not.
	`{"expected_version":"any","events":[{"type":"T","data":{"a":1}}]}`,
	`{"expected_version":"no_stream","events":[{"id":"0b6e8a57-2f0d-4f3e-9d7e-6c1a2b3c4d5e","type":"Created","data":{"name":"x"},"metadata":{"trace":"y"}}]}`,
	`{"expected_version":"exists","events":[{"type":"T","correlation_id":"c","causation_id":"d"}]}`,
	`{"stream":"orders-1","expected_version":3,"events":[{"type":"T","data":[1,2.5,-3e2,true,false,null,"s"]}]}`,
	`{"expected_version":"17","events":[]}`,
	" { \"stream\" : \"é✓😀\" ,\n\t\"expected_version\" : 0 , \"events\" : [ { \"type\" : \"T\" , \"data\" : \"\\u00e9\" } ] } ",
	`{"events":[{"type":"T","data":{"a":"<&>\u2028"}},{"type":"T","metadata":{}}]}`,
	`{"events":[{"Type":"T","envelope":null}]}`,
	`{"expected_version":"any","events":[{"type":"T","data":{"k":"v"}}],"stream":"s"}`,
	"{\"events\":[{\"type\":\"T\xff\",\"data\":{\"a\":\"\xfe\"}}]}",
	`{"events":[{"type":"T","data":{"a":"\ud800"},"metadata":{"b":"\ud83d\ude00"}}]}`,
	"{\"stream\":\"\xed\xa0\x80\",\"events\":[{\"type\":\"T\",\"correlation_id\":\"\x80\"}]}",
	`{"events":[{"type":"T","data":{"a":1,"a":2}}]}`,
	`{"events":[{"type":"T","data":{"a":{"b":1},"c":[{"b":2,"b":3}]}}]}`,
	`{"events":[{"type":"T","data":{"a":1,"\u0061":2}}]}`,
	`{"events":[{"type":"T","data":{"x":{"a":1},"y":{"a":1}}}]}`,
	`{"events":[{"type":"T","data":{"a":}}]}`,
	`{"events":[{"type":"T","data":{"h":"<&>"},"metadata":"\u2029"}]}`,

	// Append answers, as the node writes them (json.Encoder: a newline
	// after the value) and not.
	`{"events":[{"id":"5c3f3a3e-8e43-4a52-9d0b-2b9c4a7d1e01","stream":"s","version":0,"position":1000,"leaf_hash":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=","recorded_at":"2026-03-14T15:09:26.535897932Z"},{"id":"9a1c2e0d-7f6b-4c3a-8e21-0d4b6c8e9f10","stream":"s","version":1,"position":1001,"leaf_hash":"Hz4/QEFCQ0RFRkdISUpLTE1OT1BRUlNUVVZXWFlaW1w=","recorded_at":"2026-03-14T15:09:26.535898932Z"}],"duplicate":false}` + "\n",
	`{"events":[{"id":"0b6e8a57-2f0d-4f3e-9d7e-6c1a2b3c4d5e","stream":"flux-é","version":0,"position":1000,"leaf_hash":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=","recorded_at":"2026-03-14T10:09:26.535897932-05:00"}],"duplicate":false}` + "\n",
	`{"events":[],"duplicate":true}` + "\n",
	`{"events":[{"id":"0b6e8a572f0d4f3e9d7e6c1a2b3c4d5e","leaf_hash":"AA==","recorded_at":"2026-03-14T15:09:26+02:00","version":0}]}`,
	` { "duplicate" : false , "events" : [ ] } `,
	`{"events":[{"stream":"\u003c","version":01,"leaf_hash":"","recorded_at":null}],"duplicate":true,"duplicate":false}`,
}

// Strings returns the string seeds of the targets whose inputs are
// strings (stream names, types, ids): plain, non-ASCII, and every byte an
// encoder escapes or a decoder refuses.
func Strings() []string {
	return []string{
		"", "T", "s", "orders-1", "Created", "0b6e8a57-2f0d-4f3e-9d7e-6c1a2b3c4d5e",
		"flux-é", "Événement ✓ 😀", "é✓😀",
		"<&>", "<c>", "\u2028", "\u2029", "a\"b", `a\b`, "\x01", "\t", "\x7f",
		"T\xff", "\xed\xa0\x80", "\ufffd",
		"a\"b\\c\n\x01<>&\u2028\u2029\xff",
	}
}
