// Loaded by the header template from /digits/extension-static/ (DIGITS 6's address of a view's static files).
window.segmentation6App = "loaded";
