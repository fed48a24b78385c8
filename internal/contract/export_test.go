package contract

// OasdiffBreaking exposes, to the fixture tests, the oasdiff checks raised to breaking.
var OasdiffBreaking = oasdiffBreaking
