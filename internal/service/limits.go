package service

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/getkin/kin-openapi/openapi3"
)

// The product's fixed bounds (not per-box settings). Each is written once in
// spec/openapi.json and read here from the contract embedded in gen/api, so SDKs, the
// contract diff and this code see the same number. Counts of items are maxItems. Caps in
// UTF-8 bytes are the extension x-max-bytes, not maxLength (SPEC §15: JSON Schema's maxLength
// counts characters, so an SDK checking it would pass a name the service refuses); the
// service enforces them (LIMIT_EXCEEDED) and each schema's description states its number.
var (
	RoomNameMaxBytes        = fixedLimit(maxBytes, "RoomCreateInput", "name")
	CardRoleMaxBytes        = fixedLimit(maxBytes, "CardRole")
	CardDescriptionMaxBytes = fixedLimit(maxBytes, "CardDescription")
	FilesMax                = fixedLimit("maxItems", "FileRefInputs")
	FileURLMaxBytes         = fixedLimit(maxBytes, "FileRefInput", "url")
	FileDisplayNameMaxBytes = fixedLimit(maxBytes, "FileRefInput", "display_name")
	FileMediaTypeMaxBytes   = fixedLimit(maxBytes, "FileRefInput", "media_type")
	FileVersionMaxBytes     = fixedLimit(maxBytes, "FileRefInput", "version_label")
	FileNoteMaxBytes        = fixedLimit(maxBytes, "FileAccessReportInput", "note")
	BriefAppendMaxBytes     = fixedLimit(maxBytes, "RoomBriefUpdateInput", "append_md")
	BriefMaxBytes           = fixedLimit(maxBytes, "RoomBrief", "brief_md")
	RosterMax               = fixedLimit("maxItems", "RoomDetails", "roster")
	ProfileMaxBytes         = fixedLimit(maxBytes, "ProfileText")
)

// maxBytes is the schema extension that states a string's cap in UTF-8 bytes.
const maxBytes = "x-max-bytes"

var contractDoc = func() *openapi3.T {
	doc, err := api.GetSwagger()
	if err != nil {
		panic("service: the embedded contract does not load: " + err.Error())
	}
	return doc
}()

// fixedLimit reads keyword (maxItems or x-max-bytes) of a component schema, or of a
// property path inside it.
func fixedLimit(keyword, component string, props ...string) int {
	sch := schemaAt(component, props...)
	var v *uint64
	switch keyword {
	case maxBytes:
		if f, ok := sch.Extensions[maxBytes].(float64); ok && f > 0 && f == float64(uint64(f)) {
			n := uint64(f)
			v = &n
		}
	case "maxItems":
		v = sch.MaxItems
	}
	if v == nil || *v == 0 {
		panic(fmt.Sprintf("service: spec/openapi.json states no %s for %s %v", keyword, component, props))
	}
	return int(*v)
}

// schemaAt is a component schema, or a property path inside it; a missing one is a
// broken contract (panic at init).
func schemaAt(component string, props ...string) *openapi3.Schema {
	ref := contractDoc.Components.Schemas[component]
	where := component
	for _, p := range props {
		if ref == nil || ref.Value == nil {
			break
		}
		ref, where = ref.Value.Properties[p], where+"."+p
	}
	if ref == nil || ref.Value == nil {
		panic(fmt.Sprintf("service: spec/openapi.json has no schema %s", where))
	}
	return ref.Value
}

// contractDefault is the schema default of a component or property: defaults are
// written once, in spec/openapi.json where clients see them, and used from there.
func contractDefault[T ~string](component string, props ...string) T {
	d, ok := schemaAt(component, props...).Default.(string)
	if !ok || d == "" {
		panic(fmt.Sprintf("service: spec/openapi.json states no string default for %s %v", component, props))
	}
	return T(d)
}

// The defaults of omitted inputs.
var (
	defaultInboxFilter       = contractDefault[api.InboxFilter]("InboxFilter")
	defaultClaimOrder        = contractDefault[api.ClaimOrder]("ClaimOrder")
	defaultHistoryVisibility = contractDefault[api.HistoryVisibility]("HistoryVisibility")
	defaultRoomFollow        = contractDefault[api.Follow]("RoomCreateInput", "default_follow")
)

// defaultSettings are the values of every per-box setting an admin has not overridden:
// the defaults of the SettingsValues properties.
var defaultSettings = func() api.SettingsValues {
	values := map[string]any{}
	for name, p := range schemaAt("SettingsValues").Properties {
		if p.Value == nil || p.Value.Default == nil {
			panic("service: spec/openapi.json states no default for setting " + name)
		}
		values[name] = p.Value.Default
	}
	raw, err := json.Marshal(values)
	if err != nil {
		panic(err)
	}
	var s api.SettingsValues
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		panic("service: SettingsValues defaults: " + err.Error())
	}
	return s
}()
