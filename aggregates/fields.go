package aggregates

import (
	"reflect"
	"strings"
)

// The walk that holds every field of a decoded command to its type's rule
// (values.go, lists.go), and the face the same types show the schema
// generator (SchemaOf).

// crossFieldRules is implemented by a command whose fields have rules
// between them (a kind that names what else is required, a bound that
// depends on another field): its Validate runs after every field passed
// its own type's rule, and checks only those.
type crossFieldRules interface {
	Validate() error
}

// Validate checks cmd's shape: every field by its type's rule, in the order
// of the struct (nested structs, lists and pointers included), then the
// rules between fields, when cmd has some. Errors are *InvalidCommandError
// with the field's JSON path under "data". DecodeCommand calls it once;
// Decide requires it passed and reads no shape again.
func Validate(cmd Command) error {
	if err := checkFields("", reflect.ValueOf(cmd)); err != nil {
		return err
	}
	if r, ok := cmd.(crossFieldRules); ok {
		return r.Validate()
	}
	return nil
}

var (
	valueTypeType     = reflect.TypeFor[valueType]()
	describedTypeType = reflect.TypeFor[describedType]()
	enumTypeType      = reflect.TypeFor[enumType]()
	pkgPath           = reflect.TypeFor[Command]().PkgPath()
)

// checkFields checks each field of the struct v (or the struct v points
// to) at prefix.
func checkFields(prefix string, v reflect.Value) error {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
			continue
		case name == "" && f.Anonymous && ownStruct(f.Type):
			// An embedded struct's fields are the parent's, in JSON too.
			if err := checkFields(prefix, v.Field(i)); err != nil {
				return err
			}
			continue
		case name == "":
			name = f.Name
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		if err := checkValue(path, v.Field(i)); err != nil {
			return err
		}
	}
	return nil
}

// checkValue checks one value at path: by its type's rule when it has one,
// else each element of a list or field of a struct of this package.
func checkValue(path string, v reflect.Value) error {
	t := v.Type()
	switch {
	case t.Kind() == reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return checkValue(path, v.Elem())
	case t.Implements(valueTypeType):
		return v.Interface().(valueType).check(path)
	case t.Implements(enumTypeType) && t.Kind() == reflect.String:
		return checkOneOf(path, v.String(), v.Interface().(enumType).Values()...)
	case t.Implements(describedTypeType):
		return nil // its JSON is its own (Duration), with no rule
	case t.Kind() == reflect.Struct && t.PkgPath() == pkgPath:
		return checkFields(path, v)
	case t.Kind() == reflect.Slice && ownStruct(t.Elem()):
		for i := range v.Len() {
			if err := checkValue(indexPath(path, i), v.Index(i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// ownStruct reports whether t is (a pointer to) a struct of this package.
func ownStruct(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct && t.PkgPath() == pkgPath
}

// TypeSchema is what a value type says of itself to the schema generator.
type TypeSchema struct {
	// JSON is the JSON Schema of the values the type accepts: keywords as
	// JSON Schema 2020-12 names them; a "$ref" to "#/$defs/<Name>" names
	// the reflected schema of a struct type of this package.
	JSON map[string]any
	// Optional reports that the type accepts its zero value, so that a
	// field of it may be left out of a command (strict decoding reads a
	// missing field as its zero value): it is not in the schema's required.
	Optional bool
}

// SchemaOf returns the schema of the value type t (values.go, lists.go,
// a named string type with Values, or Duration, whose JSON is written by
// hand), ok false when t is none of them.
// A pointer to one of them has its schema, and may be left out (nil).
func SchemaOf(t reflect.Type) (TypeSchema, bool) {
	if t.Kind() == reflect.Pointer {
		ts, ok := SchemaOf(t.Elem())
		ts.Optional = true
		return ts, ok
	}
	zero := reflect.Zero(t)
	switch {
	case t.Implements(valueTypeType):
		v := zero.Interface().(valueType)
		return TypeSchema{JSON: v.jsonSchema(), Optional: v.check("") == nil}, true
	case t.Implements(enumTypeType) && t.Kind() == reflect.String:
		values := zero.Interface().(enumType).Values()
		enum := make([]any, len(values))
		optional := false
		for i, s := range values {
			enum[i] = s
			optional = optional || s == ""
		}
		return TypeSchema{JSON: map[string]any{"type": "string", "enum": enum}, Optional: optional}, true
	case t.Implements(describedTypeType):
		return TypeSchema{JSON: zero.Interface().(describedType).jsonSchema()}, true
	}
	return TypeSchema{}, false
}
