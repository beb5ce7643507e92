/* Hovering a listed disagreement or fault outlines the cells its data-tokens name. */
document.querySelectorAll('[data-tokens]').forEach(function(li){
  var ids=li.getAttribute('data-tokens').split(' ').filter(Boolean);
  li.addEventListener('mouseenter',function(){ids.forEach(function(i){var c=document.getElementById(i);if(c)c.classList.add('hl');});});
  li.addEventListener('mouseleave',function(){ids.forEach(function(i){var c=document.getElementById(i);if(c)c.classList.remove('hl');});});
});
