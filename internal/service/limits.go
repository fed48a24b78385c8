package service

import (
	"fmt"

	"github.com/agentbox/agentbox/gen/api"
	"github.com/getkin/kin-openapi/openapi3"
)

// The product's fixed bounds (not per-box settings). Each is written once, as a schema
// keyword of spec/openapi.json (maxLength, maxItems), and read here from the contract
// embedded in gen/api, so SDKs, the contract diff and this code see the same number. A
// string's maxLength is also its cap in UTF-8 bytes, which the service enforces (the
// schema validator counts characters, so only the byte form reaches the service).
var (
	RoomNameMaxBytes        = fixedLimit("maxLength", "RoomCreateInput", "name")
	CardRoleMaxBytes        = fixedLimit("maxLength", "CardRole")
	CardDescriptionMaxBytes = fixedLimit("maxLength", "CardDescription")
	FilesMax                = fixedLimit("maxItems", "FileRefInputs")
	FileNoteMaxBytes        = fixedLimit("maxLength", "FileAccessReportInput", "note")
	BriefAppendMaxBytes     = fixedLimit("maxLength", "RoomBriefUpdateInput", "append_md")
	BriefMaxBytes           = fixedLimit("maxLength", "RoomBrief", "brief_md")
	RosterMax               = fixedLimit("maxItems", "RoomDetails", "roster")
	ProfileMaxBytes         = fixedLimit("maxLength", "ProfileText")
)

var contractDoc = func() *openapi3.T {
	doc, err := api.GetSwagger()
	if err != nil {
		panic("service: the embedded contract does not load: " + err.Error())
	}
	return doc
}()

// fixedLimit reads keyword (maxLength or maxItems) of a component schema, or of a
// property path inside it. A missing bound is a broken contract: it panics at init.
func fixedLimit(keyword, component string, props ...string) int {
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
	var v *uint64
	switch keyword {
	case "maxLength":
		v = ref.Value.MaxLength
	case "maxItems":
		v = ref.Value.MaxItems
	}
	if v == nil || *v == 0 {
		panic(fmt.Sprintf("service: spec/openapi.json states no %s for %s", keyword, where))
	}
	return int(*v)
}
