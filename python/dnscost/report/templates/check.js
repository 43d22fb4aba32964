window.addEventListener("load", function () {
  var figures = document.querySelectorAll("figure");
  var rendered = 0;
  figures.forEach(function (figure) {
    var svg = figure.querySelector("svg");
    if (!svg) { return; }
    var box = svg.getBoundingClientRect();
    var inner = svg.getBBox();
    if (box.width > 0 && box.height > 0 && inner.width > 0 && inner.height > 0) { rendered += 1; }
  });
  document.body.dataset.figuresOk = rendered + "/" + figures.length;
});
