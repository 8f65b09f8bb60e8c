package jsontest

import "strings"

// Nested returns depth arrays (or objects, each holding its child under the
// key "a") around a null.
func Nested(depth int, objects bool) string {
	if objects {
		return strings.Repeat(`{"a":`, depth) + "null" + strings.Repeat("}", depth)
	}
	return strings.Repeat("[", depth) + "null" + strings.Repeat("]", depth)
}

// Alternating nests depth containers, object and array in turn, so that the
// container kinds cross the 64-bit words of jsonscan.Valid's stack.
func Alternating(depth int) string {
	var open, close strings.Builder
	for d := 0; d < depth; d++ {
		if d%2 == 0 {
			open.WriteString(`{"k":`)
		} else {
			open.WriteString("[1,")
		}
	}
	for d := depth - 1; d >= 0; d-- {
		if d%2 == 0 {
			close.WriteString("}")
		} else {
			close.WriteString("]")
		}
	}
	return open.String() + "0" + close.String()
}

// Case is one input with whether it is JSON text.
type Case struct {
	Name string
	In   string
	// Text is jsonscan.Valid's answer: json.Valid's answer for every
	// document whose strings are valid UTF-8 without unpaired surrogate
	// escapes, and false for the others (checked against a plain
	// reference in jsonscan's TestValidJSON).
	Text bool
}

// Cases returns the grammar's corners, each with whether it is JSON text.
// Some are deep (10000 containers) and long: Seeds leaves those out.
func Cases() []Case {
	return []Case{
		// Empty input and whitespace.
		{"empty", "", false},
		{"only spaces", "   ", false},
		{"only newline", "\n", false},
		{"space around", " {} ", true},
		{"all four whitespace", "\t\r\n {\t\r\n \"a\"\t\r\n :\t\r\n 1\t\r\n ,\t\r\n \"b\" : [\t\r\n 1\t\r\n ,\t\r\n 2\t\r\n ]\t\r\n }\t\r\n ", true},
		{"form feed is not whitespace", "\f{}", false},
		{"vertical tab is not whitespace", "{}\v", false},
		{"nbsp is not whitespace", "\u00a0{}", false},
		{"NUL after value", "{}\x00", false},
		{"BOM before value", "\ufeff{}", false},

		// Literals.
		{"true", "true", true},
		{"false", "false", true},
		{"null", "null", true},
		{"True", "True", false},
		{"tru", "tru", false},
		{"fals", "fals", false},
		{"nul", "nul", false},
		{"truex", "truex", false},
		{"nullnull", "nullnull", false},
		{"literals in array", "[true,false,null]", true},
		{"literal glued", "[truefalse]", false},
		{"NaN", "NaN", false},
		{"Infinity", "Infinity", false},

		// Numbers.
		{"zero", "0", true},
		{"minus zero", "-0", true},
		{"integer", "1234567890", true},
		{"negative", "-42", true},
		{"leading zero", "01", false},
		{"minus leading zero", "-01", false},
		{"double zero", "00", false},
		{"plus sign", "+1", false},
		{"lone minus", "-", false},
		{"minus minus", "--1", false},
		{"minus space", "- 1", false},
		{"fraction", "3.25", true},
		{"zero fraction", "0.5", true},
		{"leading dot", ".5", false},
		{"trailing dot", "1.", false},
		{"dot exponent", "1.e5", false},
		{"two dots", "1.2.3", false},
		{"exponent", "1e5", true},
		{"exponent upper", "1E5", true},
		{"exponent plus", "1e+5", true},
		{"exponent minus", "1e-5", true},
		{"exponent zeros", "1e007", true},
		{"fraction exponent", "-0.0e-0", true},
		{"bare exponent", "1e", false},
		{"exponent sign only", "1e+", false},
		{"exponent double sign", "1e+-5", false},
		{"exponent fraction", "1e5.5", false},
		{"bare e", "e5", false},
		{"hex", "0x10", false},
		{"big number", "123456789012345678901234567890e999999", true},
		{"number then letter", "1a", false},
		{"numbers in array", "[0,-0,1.5,-2e3,0E-0]", true},
		{"leading zero in array", "[01]", false},
		{"number then brace", "1}", false},

		// Strings and escapes.
		{"empty string", `""`, true},
		{"string", `"hello"`, true},
		{"unterminated", `"hello`, false},
		{"lone quote", `"`, false},
		{"all simple escapes", `"\" \\ \/ \b \f \n \r \t"`, true},
		{"escape a", `"\a"`, false},
		{"escape v", `"\v"`, false},
		{"escape 0", `"\0"`, false},
		{"escape x", `"\x41"`, false},
		{"escape quote single", `"\'"`, false},
		{"escape upper U", `"\U0041"`, false},
		{"backslash at end", `"\`, false},
		{"escaped closing quote", `"\"`, false},
		{"unicode escape", `"\u0041"`, true},
		{"unicode escape mixed case hex", `"\uaBcD\uFfFf\u0000"`, true},
		{"unicode escape short", `"\u004"`, false},
		{"unicode escape non-hex", `"\u00G1"`, false},
		{"unicode escape at end", `"\u00`, false},
		{"surrogate pair", `"\ud83d\ude00"`, true},
		{"surrogate pair upper hex", `"\uD83D\uDE00"`, true},
		{"lone high surrogate", `"\ud800"`, false},
		{"lone low surrogate", `"\udc00"`, false},
		{"reversed surrogates", `"\udc00\ud800"`, false},
		{"high surrogate then text", `"\ud800abcdef"`, false},
		{"high surrogate then other escape", `"\ud800\n"`, false},
		{"high surrogate then BMP escape", `"\ud800\u0041"`, false},
		{"two high surrogates", `"\ud800\ud800"`, false},
		{"high surrogate at end", `"\udbff"`, false},
		{"last BMP before surrogates", `"\ud7ff"`, true},
		{"first BMP after surrogates", `"\ue000"`, true},
		{"lone surrogate in key", `{"\ud800":1}`, false},
		{"lone surrogate deep", `{"a":[1,{"b":"x\udfffy"}]}`, false},
		{"escaped backslash before u", `"\\ud800"`, true},
		{"control byte NUL", "\"a\x00b\"", false},
		{"control byte 0x1f", "\"a\x1fb\"", false},
		{"raw tab in string", "\"a\tb\"", false},
		{"raw newline in string", "\"a\nb\"", false},
		{"DEL in string", "\"a\x7fb\"", true},
		{"space in string", `" "`, true},
		{"UTF-8 in string", `"héllo, 世界 😀"`, true},
		{"UTF-8 of every length", "\"\u007f\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf\"", true},
		{"invalid UTF-8 byte", "\"\xff\"", false},
		{"lone continuation byte", "\"\x80\"", false},
		{"truncated UTF-8", "\"\xe4\xb8\"", false},
		{"truncated UTF-8 at end of input", "\"\xe4\xb8", false},
		{"overlong UTF-8", "\"\xc0\xaf\"", false},
		{"UTF-16 surrogate in UTF-8", "\"\xed\xa0\x80\"", false},
		{"above U+10FFFF", "\"\xf4\x90\x80\x80\"", false},
		{"invalid UTF-8 in key", "{\"\xff\":1}", false},
		{"invalid UTF-8 deep in long string", `"` + strings.Repeat("a", 37) + "\xfe" + strings.Repeat("a", 20) + `"`, false},
		{"invalid UTF-8 after valid multibyte", "\"" + strings.Repeat("é", 9) + "\xe9" + strings.Repeat("é", 9) + "\"", false},
		{"invalid UTF-8 outside string", "\xff", false},
		{"long plain string", `"` + strings.Repeat("abcdefgh", 50) + `"`, true},
		{"quote at each word offset", `["` + strings.Repeat("x", 7) + `","` + strings.Repeat("y", 9) + `","` + strings.Repeat("z", 16) + `"]`, true},
		{"control byte deep in long string", `"` + strings.Repeat("a", 37) + "\x01" + strings.Repeat("a", 20) + `"`, false},
		{"escape deep in long string", `"` + strings.Repeat("a", 29) + `\n` + strings.Repeat("a", 20) + `"`, true},
		{"high bytes then quote", "\"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\"", false},
		{"multibyte across words then quote", "\"" + strings.Repeat("世", 11) + "\"", true},
		{"single quotes", `'a'`, false},
		{"string then string", `"a""b"`, false},

		// Objects and arrays.
		{"empty object", "{}", true},
		{"empty array", "[]", true},
		{"object", `{"a":1,"b":[true,{"c":null}],"d":"e"}`, true},
		{"array", `[1,"a",[],{}]`, true},
		{"unclosed object", "{", false},
		{"unclosed array", "[", false},
		{"unopened object", "}", false},
		{"unopened array", "]", false},
		{"mismatched close", "[}", false},
		{"mismatched close object", `{"a":1]`, false},
		{"object trailing comma", `{"a":1,}`, false},
		{"array trailing comma", "[1,]", false},
		{"array leading comma", "[,1]", false},
		{"array double comma", "[1,,2]", false},
		{"object leading comma", `{,"a":1}`, false},
		{"missing comma", "[1 2]", false},
		{"missing colon", `{"a" 1}`, false},
		{"double colon", `{"a"::1}`, false},
		{"missing value", `{"a":}`, false},
		{"missing key", `{:1}`, false},
		{"number key", `{1:1}`, false},
		{"bare key", `{a:1}`, false},
		{"literal key", `{null:1}`, false},
		{"key only", `{"a"}`, false},
		{"unclosed after member", `{"a":1`, false},
		{"unclosed after comma", `[1,`, false},
		{"bad key escape", `{"\q":1}`, false},
		{"duplicate keys", `{"a":1,"a":2}`, true},
		{"comment", "{} // x", false},
		{"block comment", "/* x */ {}", false},

		// Trailing bytes and more than one value.
		{"two objects", "{}{}", false},
		{"two objects spaced", "{} {}", false},
		{"two numbers", "1 2", false},
		{"two strings spaced", `"a" "b"`, false},
		{"trailing garbage", `{"a":1}x`, false},
		{"trailing comma", "{},", false},
		{"trailing close", "{}}", false},
		{"trailing NUL", "1\x00", false},

		// Nesting: json.Valid refuses more than 10000 open containers.
		{"arrays 10000 deep", Nested(10000, false), true},
		{"arrays 10001 deep", Nested(10001, false), false},
		{"objects 10000 deep", Nested(10000, true), true},
		{"objects 10001 deep", Nested(10001, true), false},
		{"alternating 10000 deep", Alternating(10000), true},
		{"alternating 10001 deep", Alternating(10001), false},
		{"alternating 130 deep", Alternating(130), true},
		{"arrays 10001 deep unclosed", strings.Repeat("[", 10001), false},
		{"siblings at depth 10000", strings.Repeat("[", 9999) + "[1],[2],[3]" + strings.Repeat("]", 9999), true},
		{"wrong close deep down", strings.Repeat("[", 100) + strings.Repeat(`{"a":1}`, 1) + strings.Repeat("]", 99) + "}", false},
	}
}

// Realistic is a ~2 KB event payload: nested objects and arrays, mostly
// short strings, some numbers, escapes and non-ASCII text.
const Realistic = `{
  "order_id": "ord_01J8Z6Q4M3V7K2X9T5R1B8N6C4",
  "customer": {
    "id": "cus_5f2a9c7e1d3b",
    "name": "Amélie Durand",
    "email": "amelie.durand@example.com",
    "tier": "gold",
    "address": {
      "line1": "12 rue des Lilas",
      "line2": null,
      "city": "Lyon",
      "postal_code": "69003",
      "country": "FR",
      "geo": {"lat": 45.7578, "lon": 4.8320}
    },
    "marketing_opt_in": false
  },
  "items": [
    {"sku": "TSHIRT-BLK-M", "title": "T-shirt \"Basique\" noir, taille M", "qty": 2, "unit_price": {"amount": 1999, "currency": "EUR"}, "tags": ["apparel", "cotton", "summer"]},
    {"sku": "MUG-CER-350", "title": "Mug céramique 350 ml", "qty": 1, "unit_price": {"amount": 1250, "currency": "EUR"}, "tags": ["kitchen"]},
    {"sku": "BOOK-9782070612758", "title": "Le Petit Prince", "qty": 1, "unit_price": {"amount": 795, "currency": "EUR"}, "tags": ["books", "classic", "fr"]},
    {"sku": "GIFT-WRAP", "title": "Emballage cadeau", "qty": 1, "unit_price": {"amount": 350, "currency": "EUR"}, "tags": []}
  ],
  "discounts": [
    {"code": "SUMMER24", "kind": "percent", "value": 10, "applies_to": ["TSHIRT-BLK-M"]},
    {"code": "WELCOME", "kind": "fixed", "value": 500, "applies_to": []}
  ],
  "totals": {"subtotal": 6393, "discount": 900, "shipping": 490, "tax": 1197.6, "grand_total": 7180.6, "currency": "EUR"},
  "payment": {
    "method": "card",
    "card": {"brand": "visa", "last4": "4242", "exp_month": 9, "exp_year": 2027, "three_d_secure": true},
    "captured_at": "2024-07-14T09:26:53.589Z",
    "processor_ref": "pi_3PcXyZ2eZvKYlo2C1a2b3c4d"
  },
  "shipping": {
    "carrier": "colissimo",
    "service": "domicile-sans-signature",
    "tracking": "6A12345678901",
    "estimated_delivery": "2024-07-17",
    "instructions": "Laisser au gardien si absent.\nCode porte : 4821B"
  },
  "notes": "Client fidèle \u2014 premier achat en 2019. Emoji: \ud83c\udf89",
  "attempts": [1, 2, 3],
  "flags": {"fraud_score": 0.03, "manual_review": false, "source": "web", "ab_bucket": -1, "ratio": 1.5e-3}
}`
