import "./style.css";

let saves = 0;
document.getElementById("save").addEventListener("click", () => {
  saves += 1;
  document.getElementById("saved").textContent = `saved ${saves} times`;
});
